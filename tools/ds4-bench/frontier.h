// The frontier walk of ds4-bench, shared with the llama.cpp peer (bench/peer_bench.cpp) so both
// measure the same thing: which context sizes are visited, how the token sequence is read and
// how the greedy decode probe picks its tokens.
//
// Frontiers are ctx_start, ctx_start + step, ctx_start + 2*step, ... below ctx_max, then ctx_max
// itself (as upstream: the last step is shortened to land on ctx_max). Row k
// times the prefill of only the tokens between frontier k-1 (0 for the first) and frontier k,
// then a decode probe of gen_tokens tokens from that frontier, which is undone afterwards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds4::bench {

struct SweepShape {
    int64_t ctx_start = 2048;
    int64_t ctx_max = 32768;
    int64_t step_incr = 2048;
    int64_t gen_tokens = 128;  // 0: prefill only
};

// The frontiers of `s`, ascending. Throws ds4::Error on a non-positive start or step,
// ctx_max < ctx_start, a negative gen_tokens, or more than kMaxFrontiers rows, naming the flag.
inline constexpr int64_t kMaxFrontiers = 1000000;
std::vector<int64_t> frontiers(const SweepShape& s);

// Positions a context must hold for the whole walk: the last frontier plus the probe.
int64_t context_needed(const SweepShape& s);

// Throws ds4::Error when `ids` holds fewer tokens than the last frontier (`what` names their
// source, e.g. the file), or an id is outside [0, n_vocab).
void check_sequence(const std::vector<int32_t>& ids, const SweepShape& s, int64_t n_vocab,
                    const std::string& what);

// The probe's greedy choice: argmax of logits[0, n), never `eos` (pass -1 for none): when the
// argmax is EOS the next best token is taken, so every probe decodes the same number of tokens.
int32_t greedy_non_eos(const float* logits, int64_t n, int32_t eos);
// The k best ids other than eos, best first (ties: lower id first); k <= n - 1.
std::vector<int32_t> best_non_eos(const float* logits, int64_t n, int32_t eos, int64_t k);

}  // namespace ds4::bench
