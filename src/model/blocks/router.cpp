#include "model/blocks/router.h"

#include <algorithm>
#include <cmath>
#include <span>

#include "model/blocks/top_k.h"

namespace ds4::blocks {
namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

}  // namespace

void Router::score(const float* logits, float* prob) const {
    const int64_t E = p_.n_expert;
    switch (p_.gating) {
    case Gating::SqrtSoftplus:
        for (int64_t e = 0; e < E; ++e) prob[e] = std::sqrt(softplus(logits[e]));
        break;
    case Gating::Sigmoid:
        for (int64_t e = 0; e < E; ++e) prob[e] = 1.0f / (1.0f + std::exp(-logits[e]));
        break;
    case Gating::Softmax: {
        const float mx = *std::max_element(logits, logits + E);
        float sum = 0.0f;
        for (int64_t e = 0; e < E; ++e) sum += (prob[e] = std::exp(logits[e] - mx));
        const float inv = 1.0f / sum;
        for (int64_t e = 0; e < E; ++e) prob[e] *= inv;
        break;
    }
    }
}

void Router::select(const float* prob, RouterScratch& s, Route& r) const {
    const int64_t E = p_.n_expert, K = p_.n_used;
    const float* biased = prob;
    if (p_.selection_bias) {
        s.biased.resize(size_t(E));
        for (int64_t e = 0; e < E; ++e) s.biased[size_t(e)] = prob[e] + p_.selection_bias[e];
        biased = s.biased.data();
    }
    rank_top_k(std::span<const float>(biased, size_t(E)), K, s.order);
    r.chosen.assign(s.order.begin(), s.order.begin() + K);
    r.margin = std::numeric_limits<float>::quiet_NaN();
    if (K < E) {
        const int32_t next = *std::min_element(s.order.begin() + K, s.order.end(), [&](int32_t a, int32_t b) {
            return biased[a] > biased[b];
        });
        r.margin = biased[s.order[size_t(K - 1)]] - biased[next];
    }
}

void Router::weigh(const float* prob, Route& r) const {
    float sum = 0.0f;
    for (int32_t e : r.chosen) sum += prob[e];
    const float norm = p_.normalize ? 1.0f / std::max(sum, 6.103515625e-5f) : 1.0f;
    r.weight.resize(r.chosen.size());
    for (size_t k = 0; k < r.chosen.size(); ++k) r.weight[k] = prob[r.chosen[k]] * norm * p_.scale;
}

void Router::route(const float* logits, RouterScratch& s, Route& r) const {
    s.prob.resize(size_t(p_.n_expert));
    score(logits, s.prob.data());
    select(s.prob.data(), s, r);
    weigh(s.prob.data(), r);
}

}  // namespace ds4::blocks
