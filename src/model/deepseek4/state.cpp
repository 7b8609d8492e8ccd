// A DeepSeek V4 sequence's state as bytes (docs/STATE_FORMAT.md): per layer of the range, the
// raw window's rows in position order (not ring order), the compressed rows, and the
// compressors' open windows. Loading rebuilds exactly the state that evaluating the tokens
// leaves, so continuing after a load equals never having saved.
#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/sequence.h"
#include "model/state_file.h"

namespace ds4::deepseek4 {
std::vector<uint8_t> Model::save_state(const model::Sequence& seq, std::span<const float> logits) const {
    const auto* s = dynamic_cast<const Sequence*>(&seq);
    if (!s || &s->owner() != this) fail("save_state: a sequence of another model");
    const model::StateHeader h = model::state_header(info_, *s, logits);
    model::StateWriter w(h);
    const int64_t pos = s->pos();
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) {
        w.begin_layer(il, layer_hash_[il]);
        write_layer_section(w, s->layer(il), pos);
        w.end_layer();
    }
    return w.finish();
}

void Model::load_state(std::span<const uint8_t> bytes, model::Sequence& seq, std::vector<float>* logits) const {
    auto* target = dynamic_cast<Sequence*>(&seq);
    if (!target || &target->owner() != this) fail("load_state: a sequence of another model");
    model::StateReader r(bytes, "state");
    const model::StateHeader& h = r.header();
    model::check_state_header(h, info_, file_->path(), target->options(), /*check_qat=*/true);
    const int64_t pos = int64_t(h.tokens.size());

    // Into a fresh sequence with the target's options: the target changes only on success.
    Sequence fresh(*this, target->options());
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) {
        if (r.begin_layer(il) != layer_hash_[il])
            r.bad(fmt::format("layer {} was saved with other weights (tensor types or shapes differ)", il));
        read_layer_section(r, il, pos, fresh.layer(il));
        r.end_layer();
    }
    r.finish();
    fresh.set_tokens(h.tokens);
    target->assign(fresh);
    if (logits) *logits = h.logits;
}

}  // namespace ds4::deepseek4
