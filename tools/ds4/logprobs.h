// ds4's logprob diagnostics (spec/PRODUCT.md §10.2, upstream's spellings and output shapes;
// docs/QUANTIZE.md "Judging a new file"):
//
//   --dump-logprobs FILE    greedy continuation of -p / --prompt-file (the one-turn chat, or
//                           --raw-prompt) until a stop token, -n or a full context; per step the
//                           selected (argmax) token and the --logprobs-top-k alternatives as JSON:
//                           {"source":"ds4","prompt_tokens","ctx","top_k","steps":[{"step",
//                           "selected":TOKEN,"top_logprobs":[{"token":TOKEN,"logit","logprob"}]}]}
//                           with TOKEN = {"id","text","bytes"}; the list is by logit, highest
//                           first (ties: lower id), logprob = logit - log(sum exp(logits)).
//   --perplexity-file FILE  teacher-forced NLL of the file's text (tokenized as plain text: no
//                           BOS, no template). The first 32 tokens are context only (upstream's
//                           prefix); longer texts are cut into windows of --ctx tokens starting
//                           every ctx - 32 tokens, each evaluated from a fresh state, so every
//                           token from the 33rd on is scored once, with at least 32 tokens of
//                           context. -n N caps the scored tokens. stdout, upstream's line:
//                           "tokens=T scored=S nll=X avg_nll=Y ppl=Z".
//   --logprob-vectors FILE  the official-vector check (vectors.h).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "options.h"

namespace ds4::cli {

void add_logprob_flags(CLI::App& app, LogprobOptions& o);

// Runs the one diagnostic o.logprob names (exit status: 0 done; --logprob-vectors: 1 when a
// case fails).
int run_logprob_mode(const Options& o);

// One row's log-softmax and its k best tokens (by logit, ties to the lower id).
struct TokenScore {
    int32_t id = 0;
    float logit = 0;
    double logprob = 0;
};
double log_sum_exp(const float* logits, int64_t n);
std::vector<TokenScore> top_logprobs(const float* logits, int64_t n, int k);

}  // namespace ds4::cli
