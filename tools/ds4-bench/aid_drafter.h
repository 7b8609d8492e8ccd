// The draft source of ds4-bench --spec-aid: a measuring aid for speculative verification, not a
// real drafter. It knows the probe's true greedy continuation (decoded beforehand) and proposes
// it, with each draft token made wrong with probability 1 - accept, so the cost of verification
// can be measured at a chosen acceptance without a draft model.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "engine/generator.h"

namespace ds4::bench {

class AidDrafter : public engine::Drafter {
public:
    // continuation[i] is the token the greedy decode puts at position start + i. accept in
    // [0, 1]: the probability that a draft token is the true one. Whether the draft for a
    // position is wrong is decided by the position alone (a fixed hash), so every proposal of
    // that position agrees and a run is reproducible; 1 never errs, 0 always does. A wrong
    // token is another id in [0, n_vocab).
    AidDrafter(std::vector<int32_t> continuation, int64_t start, double accept, int64_t n_vocab);

    // The continuation after `next` (at position history.size()), up to `max` tokens and the
    // end of the continuation; nothing when `next` is not the continuation's token there (the
    // decode left it: verification then goes on without drafts, and the bench's check of the
    // output reports it).
    engine::Draft propose(std::span<const int32_t> history, int32_t next, int max) override;

    // The token drafted for absolute position p (the true one or a wrong one).
    int32_t draft_at(int64_t p) const;

private:
    std::vector<int32_t> cont_;
    int64_t start_;
    double accept_;
    int64_t n_vocab_;
};

}  // namespace ds4::bench
