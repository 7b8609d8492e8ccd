#include "model/blocks/hidden_out.h"

#include <cstring>

#include "common/error.h"

namespace ds4::blocks {

void check_draft_outputs(model::Batch b, const model::LayerRange& range) {
    for (const model::BatchItem& it : b) {
        if (it.hidden_want != model::Logits::None && !it.hidden) fail("batch: hidden states wanted but no buffer");
        if (it.hidden_from < 0 || (it.hidden_from > 0 && it.hidden_from >= int64_t(it.tokens.size())))
            fail("batch: hidden_from {} outside the item's {} rows", it.hidden_from, it.tokens.size());
        if (it.capture.empty()) continue;
        if (!it.captured) fail("batch: layer captures wanted but no buffer");
        for (size_t k = 0; k < it.capture.size(); ++k) {
            const uint32_t il = it.capture[k];
            if (!range.contains(il)) fail("batch: capture of layer {}, outside the layers {} this model holds", il, range.str());
            if (k > 0 && il <= it.capture[k - 1]) fail("batch: capture layers must be strictly ascending");
        }
    }
}

void write_hidden(model::Batch b, const float* X, int64_t width) {
    int64_t r = 0;
    for (const model::BatchItem& it : b) {
        const int64_t n = int64_t(it.tokens.size());
        const size_t row_bytes = size_t(width) * sizeof(float);
        if (it.hidden_want == model::Logits::All)
            std::memcpy(it.hidden, X + (r + it.hidden_from) * width, size_t(n - it.hidden_from) * row_bytes);
        else if (it.hidden_want == model::Logits::Last)
            std::memcpy(it.hidden, X + (r + n - 1) * width, row_bytes);
        r += n;
    }
}

void write_captures(model::Batch b, uint32_t layer, const float* X, int64_t width) {
    int64_t r = 0;
    for (const model::BatchItem& it : b) {
        const int64_t n = int64_t(it.tokens.size()), m = n - it.hidden_from;
        for (size_t k = 0; k < it.capture.size(); ++k)
            if (it.capture[k] == layer)
                std::memcpy(it.captured + int64_t(k) * m * width, X + (r + it.hidden_from) * width,
                            size_t(m * width) * sizeof(float));
        r += n;
    }
}

bool wants_draft_outputs(model::Batch b) {
    for (const model::BatchItem& it : b)
        if (it.hidden_want != model::Logits::None || !it.capture.empty()) return true;
    return false;
}

}  // namespace ds4::blocks
