#include "speculative/dspark_drafter.h"

#include <algorithm>

namespace ds4::speculative {

DsparkDrafter::DsparkDrafter(deepseek4::DsparkHead& head, DsparkDrafterOptions opt)
    : head_(head), opt_(opt), ctx_(head.new_context(opt.qat)) {}

engine::DraftNeeds DsparkDrafter::needs() const {
    const auto& t = head_.info().target_layers;
    return {.hidden = false, .capture = {t.begin(), t.end()}, .tail = head_.window() + 1};
}

void DsparkDrafter::commit(int64_t pos, std::span<const int32_t> tokens, const float*, const float* captured) {
    head_.commit(ctx_, pos, int64_t(tokens.size()), captured);
}

engine::Draft DsparkDrafter::propose(std::span<const int32_t> history, int32_t next, int max) {
    engine::Draft d;
    const int64_t p = int64_t(history.size()) - 1;
    if (max <= 0 || p < 0) return d;
    if (p < ctx_.begin() || p >= ctx_.end()) {
        ++stats_.missing;
        return d;
    }
    const deepseek4::DsparkBlock b = head_.draft(ctx_, p, history.back(), opt_.threshold);
    ++stats_.blocks;
    if (b.proposals.empty() || b.cut == 0 || b.proposals[0] != next) {
        if (!b.proposals.empty() && b.proposals[0] != next) ++stats_.mismatch;
        return d;
    }
    const int n = std::min(b.cut - 1, max);
    d.tokens.assign(b.proposals.begin() + 1, b.proposals.begin() + 1 + n);
    stats_.drafted += n;
    return d;
}

}  // namespace ds4::speculative
