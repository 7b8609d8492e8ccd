#include "model/session.h"

#include <algorithm>

#include "common/error.h"

namespace ds4::model {

SequenceOptions SessionOptions::sequence() const {
    SequenceOptions s;
    // One name per SequenceOptions field: a field added there fails here until it is added to
    // SessionOptions and copied below.
    auto& [s_ctx, s_qat, s_rewind_slack] = s;
    s_ctx = ctx;
    s_qat = qat;
    s_rewind_slack = rewind_slack;
    return s;
}

Session::Session(Model& model, SessionOptions opt) : model_(model), opt_(opt) {
    if (opt_.prefill_chunk <= 0) fail("prefill chunk {} must be positive", opt_.prefill_chunk);
    seq_ = model.new_sequence(opt_.sequence());
}

void Session::eval(const std::vector<int32_t>& tokens, std::vector<float>* logits, bool all_logits) {
    const int64_t n = int64_t(tokens.size());
    const int64_t V = model_.info().n_vocab;
    // The whole sequence is checked before the first chunk (Model::eval checks each chunk):
    // a bad id or an overflow in a later chunk must not leave the session half advanced.
    if (n == 0) fail("nothing to evaluate");
    if (pos() + n > opt_.ctx) fail("context exceeded: {} tokens + {} new > context size {}", pos(), n, opt_.ctx);
    for (int32_t t : tokens)
        if (t < 0 || t >= V) fail("token id {} out of range [0, {})", t, V);
    if (logits) logits->assign(size_t(all_logits ? n : 1) * V, 0.0f);
    for (int64_t b = 0; b < n; b += opt_.prefill_chunk) {
        const int64_t len = std::min(opt_.prefill_chunk, n - b);
        BatchItem it{seq_.get(), std::span<const int32_t>(tokens.data() + b, size_t(len))};
        if (logits && all_logits) {
            it.want = Logits::All;
            it.logits = logits->data() + size_t(b) * V;
        } else if (logits && b + len == n) {
            it.want = Logits::Last;
            it.logits = logits->data();
        }
        model_.eval(Batch(&it, 1));
    }
}

void Session::truncate(int64_t n) {
    if (n < 0 || n > pos()) fail("cannot truncate a session of {} tokens to {}", pos(), n);
    if (n == pos()) return;
    if (seq_->can_rewind(n)) {
        seq_->rewind(n);
        return;
    }
    // Too far back for the rings: evaluate the kept prefix again (exactly the state a fresh run
    // leaves).
    std::vector<int32_t> keep(seq_->tokens().begin(), seq_->tokens().begin() + n);
    seq_->clear();
    if (!keep.empty()) eval(keep, nullptr);
}

}  // namespace ds4::model
