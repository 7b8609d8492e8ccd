// Token sampling from logits (spec/PRODUCT.md §3.1, §4.4): temperature, top-k, top-p, min-p, seed.
// Defaults are upstream's: T = 1, top-p = 1, min-p = 0.05, no top-k; temperature <= 0 is greedy.
//
// Order: temperature scales the logits; top-k keeps the k largest; min-p keeps tokens whose
// probability is at least min_p times the top token's (after temperature); top-p keeps the
// smallest most-probable set whose mass reaches top_p; one token is drawn from what is left,
// renormalised. Ties keep the lower id first, so results do not depend on sort stability.
#pragma once

#include "sampling/rng.h"

#include <cstdint>
#include <span>
#include <vector>

namespace ds4::sampling {

struct SamplerParams {
    float temperature = 1.0f;  // <= 0: greedy
    int top_k = 0;             // <= 0: no cap
    float top_p = 1.0f;        // >= 1: off
    float min_p = 0.05f;       // <= 0: off
    uint64_t seed = 0;
};

// The values a user may ask for, one rule for every front end (the server's request fields,
// the CLI's flags): temperature finite and >= 0 (0: greedy), top_p and min_p in [0, 1], top_k
// >= 0 (0: off). Each returns nullptr when `v` is allowed, else the rule it breaks ("must be in
// [0, 1]"); callers put the field's or flag's name in front. NaN breaks every rule.
const char* temperature_error(double v);
const char* top_p_error(double v);
const char* min_p_error(double v);
const char* top_k_error(int64_t v);

// Index of the largest logit (lowest index on ties; NaN never wins). Throws ds4::Error on an
// empty span or when no logit is a number.
int32_t argmax(std::span<const float> logits);

struct Candidate {
    int32_t id;
    float p;  // probability after all filters (sums to 1 over the candidates)
};

class Sampler {
public:
    explicit Sampler(SamplerParams params = {});

    int32_t sample(std::span<const float> logits);
    // The candidates sample() would draw from, most probable first (for tests and logprobs).
    std::vector<Candidate> candidates(std::span<const float> logits) const;

    // One id drawn from `dist` with this sampler's stream (probabilities summing to about 1; the
    // last candidate absorbs rounding), and a bare uniform draw in [0, 1): speculative
    // sampling's acceptance test and residual draw.
    int32_t draw(std::span<const Candidate> dist);
    double uniform() { return rng_.uniform(); }

    const SamplerParams& params() const { return params_; }
    void reseed(uint64_t seed) { rng_.reseed(seed); }

private:
    SamplerParams params_;
    Rng rng_;
};

}  // namespace ds4::sampling
