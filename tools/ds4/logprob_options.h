// The options of ds4's logprob diagnostics (logprobs.h): one field in Options, their flags
// added by add_logprob_flags().
#pragma once

#include <string>

namespace ds4::cli {

struct LogprobOptions {
    std::string vectors;      // --logprob-vectors FILE (official.vec)
    std::string perplexity;   // --perplexity-file FILE
    std::string dump;         // --dump-logprobs FILE (with -p / --prompt-file)
    int top_k = 20;           // --logprobs-top-k N (1..128; upstream's default)
    double max_delta = 4.0;   // --logprob-vectors-max-delta NATS (upstream's bound)
    bool active() const { return !vectors.empty() || !perplexity.empty() || !dump.empty(); }
};

}  // namespace ds4::cli
