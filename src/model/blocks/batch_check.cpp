#include "model/blocks/batch_check.h"

#include <set>

#include "common/error.h"

namespace ds4::blocks {

void check_batch(model::Batch b, uint32_t n_vocab, bool advancing,
                 const std::function<bool(const model::Sequence&)>& ours) {
    std::set<const model::Sequence*> seen;
    for (const model::BatchItem& it : b) {
        const model::Sequence* seq = it.seq;
        if (!seq || !ours(*seq)) fail("batch: a sequence of another model");
        if (!seen.insert(seq).second) fail("batch: a sequence appears twice in one call");
        const int64_t n = int64_t(it.tokens.size());
        if (n == 0) fail("batch: nothing to evaluate for a sequence");
        if (advancing && seq->pos() + n > seq->options().ctx)
            fail("context exceeded: {} tokens + {} new > context size {}", seq->pos(), n, seq->options().ctx);
        for (int32_t t : it.tokens)
            if (t < 0 || uint32_t(t) >= n_vocab) fail("token id {} out of range [0, {})", t, n_vocab);
        if (it.want != model::Logits::None && !it.logits) fail("batch: logits wanted but no buffer");
    }
}

}  // namespace ds4::blocks
