// The SIMD body of the indexer scores, written once over a vector-traits type V (AVX2: 8
// floats, AVX-512: 16) and included by indexer_avx2.cpp / indexer_avx512.cpp, each compiled
// with its own instruction-set flags (hence the anonymous namespace).
//
// Vectors run across heads, not along dim: the query is transposed once per call to
// qt[dim][heads] (heads padded with zeros to whole vectors), and each key value is broadcast
// against a vector of heads. A (row, head) dot is then one FMA chain over dim, like the
// reference, and the head sum needs one horizontal add per row instead of one per (row, head)
// (with per-pair reductions, the old dot-per-head loop was ~10% of a 4096-token prefill).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace {

// Adds sum_h w_h relu(q_h . k_i) over heads h0 .. h0 + J*W into s[i] (lane l takes heads
// h0 + l, h0 + W + l, ...: in every pass the same lane order), for R rows k[0..R).
template <class V, int R, int J>
inline void head_pass(const float* qt, int hp, int dim, const float* const* k, int h0,
                      const float* w, typename V::reg* s) {
    constexpr int W = V::width;
    typename V::reg acc[R][J];
    for (int i = 0; i < R; ++i)
        for (int j = 0; j < J; ++j) acc[i][j] = V::zero();
    for (int d = 0; d < dim; ++d) {
        const float* qd = qt + int64_t(d) * hp + h0;
        typename V::reg qv[J];
        for (int j = 0; j < J; ++j) qv[j] = V::load(qd + j * W);
        for (int i = 0; i < R; ++i) {
            const auto kb = V::broadcast(k[i][d]);
            for (int j = 0; j < J; ++j) acc[i][j] = V::fmadd(qv[j], kb, acc[i][j]);
        }
    }
    for (int j = 0; j < J; ++j) {
        const auto wv = V::load(w + h0 + j * W);
        for (int i = 0; i < R; ++i) s[i] = V::fmadd(wv, V::relu(acc[i][j]), s[i]);
    }
}

// Scores of R rows starting at key row r.
template <class V, int R, int J>
inline void score_rows(const float* qt, const float* w, int hp, int dim, const float* keys,
                       int64_t r, float* score) {
    constexpr int W = V::width;
    const float* k[R];
    for (int i = 0; i < R; ++i) k[i] = keys + (r + i) * int64_t(dim);
    typename V::reg s[R];
    for (int i = 0; i < R; ++i) s[i] = V::zero();
    int h0 = 0;
    for (; h0 + J * W <= hp; h0 += J * W) head_pass<V, R, J>(qt, hp, dim, k, h0, w, s);
    for (; h0 < hp; h0 += W) head_pass<V, R, 1>(qt, hp, dim, k, h0, w, s);
    for (int i = 0; i < R; ++i) score[r + i] = V::sum(s[i]);
}

template <class V, int R, int J>
void indexer_scores_simd(const float* q, const float* weights, int n_head, int dim,
                         const float* keys, int64_t r0, int64_t r1, float* score) {
    constexpr int W = V::width;
    const int hp = (n_head + W - 1) / W * W;
    thread_local std::vector<float> qt, w;
    qt.assign(size_t(hp) * size_t(dim), 0.0f);
    w.assign(size_t(hp), 0.0f);
    for (int h = 0; h < n_head; ++h) {
        w[size_t(h)] = weights[h];
        for (int d = 0; d < dim; ++d) qt[size_t(d) * size_t(hp) + size_t(h)] = q[int64_t(h) * dim + d];
    }
    int64_t r = r0;
    for (; r + R <= r1; r += R) score_rows<V, R, J>(qt.data(), w.data(), hp, dim, keys, r, score);
    for (; r < r1; ++r) score_rows<V, 1, J>(qt.data(), w.data(), hp, dim, keys, r, score);
}

}  // namespace
