// Log-probabilities of a sampled token and of the most likely alternatives, for the OpenAI
// `logprobs` / `top_logprobs` fields (ds4-server, docs/SERVER.md "Log-probabilities"). They are
// the model's own distribution: log-softmax of the raw logits at temperature 1, before any
// sampler truncation (top-k, top-p, min-p) or temperature, as OpenAI reports them.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ds4::sampling {

struct TokenLogprob {
    int32_t id = -1;
    float logprob = 0;  // natural log; never below kMinLogprob (JSON has no -infinity)
};

// The floor for tokens of zero probability (a banned id's -inf logit), as OpenAI reports them.
inline constexpr float kMinLogprob = -9999.0f;

struct LogprobsAt {
    float logprob = 0;              // of the sampled id
    std::vector<TokenLogprob> top;  // the `top` most likely ids, most likely first (ties: lower id)
};

// `row` holds the logits of one position (n_vocab values, may hold -inf); `id` is in range;
// 0 <= top <= row.size(). Throws ds4::Error for a row without a finite logit.
LogprobsAt logprobs_at(std::span<const float> row, int32_t id, int top);

}  // namespace ds4::sampling
