// Hyper-connections (spec/ARCHITECTURE.md §3.2, §3.4, §3.6): the residual is n_hc streams of n_embd
// values; each sublayer reads a weighted mix of the streams (hc_pre) and writes back through a
// doubly-stochastic (Sinkhorn) stream mixing plus a gated copy of its output (hc_post).
#pragma once

#include <cstdint>
#include <vector>

namespace ds4::ops {

// The mixing coefficients of one sublayer, from its (2 + n_hc) * n_hc mixes m.
struct HcMix {
    int n_hc = 0;
    std::vector<float> pre;   // [n_hc]        a_k = sigmoid(s0 m_k + b_k) + eps
    std::vector<float> post;  // [n_hc]        c_k = 2 sigmoid(s1 m_{n+k} + b_{n+k})
    std::vector<float> comb;  // [n_hc][n_hc]  C[src][dst] after Sinkhorn
};

// Splits the mixes m ([(2+n_hc)*n_hc]) with scale[3] and base[(2+n_hc)*n_hc] and runs
// `iterations` Sinkhorn steps (row softmax + eps, column norm, then (iterations-1) x
// (row norm, column norm)); all in fp32.
HcMix hc_split(const float* m, const float* scale, const float* base, int n_hc, int iterations,
               float eps);
// y[n_embd] = sum_k pre_k * X_k, with X the raw (un-normalised) streams [n_hc][n_embd].
void hc_weighted_sum(const float* X, const float* pre, int n_hc, int64_t n_embd, float* y);
// X'_j = post_j * F + sum_i C[i][j] X_i, in place on X ([n_hc][n_embd]).
void hc_post(const HcMix& mix, const float* F, float* X, int64_t n_embd);
// Output head gate: a_k = sigmoid(scale * m_k + base_k) + eps.
std::vector<float> hc_head_weights(const float* m, float scale, const float* base, int n_hc,
                                   float eps);

}  // namespace ds4::ops
