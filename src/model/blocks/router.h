// The router of a mixture-of-experts FFN (family-neutral): expert scores from the router
// logits by a gating function, the top-k choice by score plus an optional selection bias, and
// the routing weights (optionally normalised over the chosen experts, then scaled).
//
//   DeepSeek V4: sqrt(softplus), bias exp_probs_b, normalised, scale 1.5 (Flash) / 2.5 (PRO)
//   GLM 5 / DeepSeek V3: sigmoid, bias exp_probs_b, normalised, scale 2.5
//   Mixtral-style: softmax, no bias, normalised, scale 1
//
// A family may choose the experts itself (e.g. hash routing) and still use score() and weigh().
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

namespace ds4::blocks {

enum class Gating {
    SqrtSoftplus,  // s_e = sqrt(softplus(l_e))
    Sigmoid,       // s_e = 1 / (1 + exp(-l_e))
    Softmax,       // s_e = exp(l_e - max l) / sum exp(l - max l), over all experts
};

struct RouterParams {
    Gating gating = Gating::Softmax;
    int64_t n_expert = 0, n_used = 0;         // E, K (1 <= K <= E)
    const float* selection_bias = nullptr;    // [E] added to the scores to choose, never to weigh
    bool normalize = false;                   // weights divided by the sum of the chosen scores
    float scale = 1.0f;                       // the routed scale, after normalisation
};

// One row's routing: chosen experts in selection order, their weights, and the selection
// margin (the last chosen expert's biased score minus the best one left out; NaN when the
// family chose the experts itself or K = E).
struct Route {
    std::vector<int32_t> chosen;  // [K]
    std::vector<float> weight;    // [K]
    float margin = std::numeric_limits<float>::quiet_NaN();
};

// Per-thread scratch of route() (sized on first use).
struct RouterScratch {
    std::vector<float> prob, biased;
    std::vector<int32_t> order;
};

class Router {
public:
    explicit Router(const RouterParams& p) : p_(p) {}
    const RouterParams& params() const { return p_; }

    // prob[e] = the gating function of logits[0 .. E).
    void score(const float* logits, float* prob) const;
    // r.chosen = the top K experts by prob + bias (ties: lower id), best first; r.margin.
    void select(const float* prob, RouterScratch& s, Route& r) const;
    // r.weight[k] = prob[r.chosen[k]] * norm * scale, norm = 1 / max(sum of the chosen probs,
    // 2^-14) when normalising, else 1. Checks nothing: r.chosen must hold valid ids.
    void weigh(const float* prob, Route& r) const;
    // score, select and weigh.
    void route(const float* logits, RouterScratch& s, Route& r) const;

private:
    RouterParams p_;
};

}  // namespace ds4::blocks
