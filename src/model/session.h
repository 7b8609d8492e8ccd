// One timeline over a model, for callers that run one sequence at a time (the CLI, tests,
// benchmarks): a Sequence the Session owns, evaluated in chunks through Model::eval.
//
//   auto m = model::open("ds4flash.gguf", {.threads = 2});
//   Session s(*m, {.ctx = 4096});
//   s.eval(tokens, &logits);           // prefill (chunked), logits of the last position
//   s.eval({next}, &logits);           // decode one token
//   s.truncate(n);                     // back to the first n tokens
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"

namespace ds4::model {

// The session's sequence (SequenceOptions: ctx, qat, rewind_slack, with the same defaults) and
// its prefill chunk. The sequence's fields are repeated flat rather than inherited, so callers
// can write {.ctx = 4096, .prefill_chunk = 64} (designated initializers cannot name a base's
// members); sequence() stops compiling when SequenceOptions gains a field (session.cpp).
struct SessionOptions {
    int64_t ctx = SequenceOptions{}.ctx;
    int64_t prefill_chunk = 512;  // tokens per call in eval(); 1 = token-by-token decode
    bool qat = SequenceOptions{}.qat;
    int64_t rewind_slack = SequenceOptions{}.rewind_slack;
    SequenceOptions sequence() const;
};

class Session {
public:
    Session(Model& model, SessionOptions opt);

    // Evaluates tokens at positions pos() .. pos()+n-1, in chunks of prefill_chunk. If logits
    // is non-null it receives [n][n_vocab] (all_logits) or [n_vocab] of the last token.
    void eval(const std::vector<int32_t>& tokens, std::vector<float>* logits, bool all_logits = false);
    // Forgets everything from position n on (n <= pos()); the state equals a fresh run over
    // the first n tokens. Cheap within options().rewind_slack positions (see can_rewind), a
    // recomputation of the kept prefix otherwise (which needs the whole model).
    void truncate(int64_t n);
    void reset() { truncate(0); }
    bool can_rewind(int64_t n) const { return seq_->can_rewind(n); }
    int64_t common_prefix(const std::vector<int32_t>& tokens) const { return seq_->common_prefix(tokens); }

    // A full copy of the state (memory: the whole state), to come back to later; restore()
    // takes a snapshot of a session over the same model and options.
    std::shared_ptr<const Sequence> snapshot() const { return seq_->clone(); }
    void restore(const Sequence& snap) { seq_->assign(snap); }

    int64_t pos() const { return seq_->pos(); }
    const std::vector<int32_t>& tokens() const { return seq_->tokens(); }
    const SessionOptions& options() const { return opt_; }
    int64_t state_bytes() const { return seq_->state_bytes(); }
    int64_t state_bytes_used() const { return seq_->state_bytes_used(); }
    void set_decision_log(DecisionLog* log) { seq_->set_decision_log(log); }
    Sequence& sequence() { return *seq_; }
    const Sequence& sequence() const { return *seq_; }
    Model& model() { return model_; }

private:
    Model& model_;
    SessionOptions opt_;
    std::unique_ptr<Sequence> seq_;
};

}  // namespace ds4::model
