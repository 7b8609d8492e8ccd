// ds4 --logprob-vectors FILE: a model against official top-logprob vectors (upstream's
// official.vec, tests/data/official-vectors), the check upstream runs as
// `ds4_test --logprob-vectors`.
//
// The file (upstream's format, "# ds4-official-logprob-vectors-v1"):
//   case <id> <ctx> <steps> <prompt-file>     prompt path: common/data_path.h
//   step <index> <selected-hex> <top-count>   the official greedy token's bytes, hex
//   top <token-hex> <official-logprob>        top-count of these per step
//   end
// '#' lines and blank lines are skipped.
//
// Per case: the prompt is rendered as one user turn (no system message, thinking off) and
// evaluated with a context of the case's ctx (or --ctx when given); then per step the official
// token is fed (teacher forcing). A step passes when the local argmax is the official token
// and every official top token is among the local --logprobs-top-k with |local - official|
// logprob <= --logprob-vectors-max-delta (upstream's 4 nats). Tokens are matched by bytes.
// A case passes when every step does. One line per case, then
//   "logprob-vectors: N cases, P passed, F failed"; exit 1 when any failed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace ds4::cli {

struct VectorTop {
    std::string bytes;
    double logprob = 0;
};
struct VectorStep {
    std::string selected;  // bytes
    std::vector<VectorTop> top;
};
struct VectorCase {
    std::string id;
    int64_t ctx = 0;
    std::string prompt_file;  // resolved (common/data_path.h)
    std::vector<VectorStep> steps;
};

// Parses `path` (vector_file.cpp, no model needed); throws ds4::Error "<path>:<line>: ..." on anything malformed (a bad hex, a
// step out of range, a top line outside a step, a case without "end", a count that does not
// match).
std::vector<VectorCase> read_vectors(const std::string& path);

int run_logprob_vectors(const Options& o);

}  // namespace ds4::cli
