#include "frontier.h"

#include <algorithm>

#include "common/error.h"

namespace ds4::bench {

std::vector<int64_t> frontiers(const SweepShape& s) {
    if (s.ctx_start <= 0) fail("--ctx-start must be positive (got {})", s.ctx_start);
    if (s.step_incr <= 0) fail("--step-incr must be positive (got {})", s.step_incr);
    if (s.ctx_max < s.ctx_start)
        fail("--ctx-max {} is smaller than --ctx-start {}", s.ctx_max, s.ctx_start);
    if (s.gen_tokens < 0) fail("--gen-tokens must be >= 0 (got {})", s.gen_tokens);
    const int64_t n = (s.ctx_max - s.ctx_start) / s.step_incr + 1;
    if (n > kMaxFrontiers)
        fail("--ctx-start {} --ctx-max {} --step-incr {} make {} frontiers, more than {}",
             s.ctx_start, s.ctx_max, s.step_incr, n, kMaxFrontiers);
    std::vector<int64_t> out;
    for (int64_t f = s.ctx_start;;) {
        out.push_back(f);
        if (f == s.ctx_max) break;
        f = s.ctx_max - f > s.step_incr ? f + s.step_incr : s.ctx_max;
    }
    return out;
}

int64_t context_needed(const SweepShape& s) { return frontiers(s).back() + s.gen_tokens; }

void check_sequence(const std::vector<int32_t>& ids, const SweepShape& s, int64_t n_vocab,
                    const std::string& what) {
    const int64_t last = frontiers(s).back();
    if (int64_t(ids.size()) < last)
        fail("{} has {} tokens, fewer than the last frontier {} (--ctx-max {}): give a longer "
             "sequence or lower --ctx-max", what, ids.size(), last, s.ctx_max);
    for (int64_t i = 0; i < last; ++i)
        if (ids[size_t(i)] >= n_vocab)
            fail("{}: token {} is {}, outside the vocabulary of {}", what, i, ids[size_t(i)], n_vocab);
}

int32_t greedy_non_eos(const float* logits, int64_t n, int32_t eos) {
    int64_t best = -1;
    for (int64_t i = 0; i < n; ++i) {
        if (i == eos) continue;
        if (best < 0 || logits[i] > logits[best]) best = i;
    }
    if (best < 0) fail("greedy probe: no token other than EOS among {} logits", n);
    return int32_t(best);
}

std::vector<int32_t> best_non_eos(const float* logits, int64_t n, int32_t eos, int64_t k) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < n; ++i)
        if (i != eos) ids.push_back(int32_t(i));
    if (k < 1 || k > int64_t(ids.size()))
        fail("greedy probe: {} starting tokens wanted from {} candidates", k, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
        return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    ids.resize(size_t(k));
    ids[0] = greedy_non_eos(logits, n, eos);  // the same choice as a single-sequence probe
    return ids;
}

}  // namespace ds4::bench
