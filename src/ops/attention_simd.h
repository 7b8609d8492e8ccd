// The SIMD body of attention (keys of key_dim, values of value_dim, optional sink), written once over a vector-traits type V (AVX2: 8 floats,
// AVX-512: 16) and included by attention_avx2.cpp / attention_avx512.cpp, each compiled with
// its own instruction-set flags (hence the anonymous namespace: one private copy per file).
//
// All heads share the rows (MQA, or MLA's latent rows), so heads are processed in blocks of up
// to 4 and each row chunk is loaded once per block: QK as NH dot products for 4 rows at once (sharing the q
// loads), PV as NH x 4-vector tiles of the output accumulated over tiles of rows. Per
// (position, head) the operation order is fixed, so any split of heads or positions over
// threads gives the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

// R rows at once: each q vector loaded serves R rows (the loads, not the FMAs, bound a
// one-row loop). Every (head, row) still accumulates over d in order.
template <class V, int NH, int R>
void qk_rows(const float* q, int hd, const float* const* rows, int64_t s0, int64_t n_rows,
             float scale, float* logits) {
    constexpr int W = V::width;
    typename V::reg acc[R][NH];
    for (int i = 0; i < R; ++i)
        for (int h = 0; h < NH; ++h) acc[i][h] = V::zero();
    int d = 0;
    for (; d + W <= hd; d += W) {
        typename V::reg x[R];
        for (int i = 0; i < R; ++i) x[i] = V::load(rows[s0 + i] + d);
        for (int h = 0; h < NH; ++h) {
            const auto qv = V::load(q + h * hd + d);
            for (int i = 0; i < R; ++i) acc[i][h] = V::fmadd(qv, x[i], acc[i][h]);
        }
    }
    if (d < hd) {
        typename V::reg x[R];
        for (int i = 0; i < R; ++i) x[i] = V::load_tail(rows[s0 + i] + d, hd - d);
        for (int h = 0; h < NH; ++h) {
            const auto qv = V::load_tail(q + h * hd + d, hd - d);
            for (int i = 0; i < R; ++i) acc[i][h] = V::fmadd(qv, x[i], acc[i][h]);
        }
    }
    for (int i = 0; i < R; ++i)
        for (int h = 0; h < NH; ++h) logits[h * n_rows + s0 + i] = V::sum(acc[i][h]) * scale;
}

// Logits of rows r0 .. r1.
template <class V, int NH>
void qk_block(const float* q, int hd, const float* const* rows, int64_t r0, int64_t r1,
              int64_t n_rows, float scale, float* logits /* [NH][n_rows] */) {
    constexpr int R = NH == 1 ? 8 : 4;  // R x NH accumulators: at most 16
    int64_t s = r0;
    for (; s + R <= r1; s += R) qk_rows<V, NH, R>(q, hd, rows, s, n_rows, scale, logits);
    for (; s < r1; ++s) qk_rows<V, NH, 1>(q, hd, rows, s, n_rows, scale, logits);
}

// One slice of the output, columns d0 .. d0 + J*W (all full vectors when Full: then the
// accumulators stay in registers; otherwise vecs of them, the last one partial), over rows
// s0 .. s1, starting from zero (first) or from what out holds, scaled by inv at the end (last).
template <class V, int NH, int J, bool Full>
inline void pv_slice(const float* p, int64_t n_rows, const float* const* rows, int64_t s0,
                     int64_t s1, int hd, int d0, bool first, bool last, const float* inv,
                     float* out) {
    constexpr int W = V::width;
    const int vecs = Full ? J : std::min(J, (hd - d0 + W - 1) / W);
    auto width = [&](int j) { return Full ? W : std::min(W, hd - d0 - j * W); };
    typename V::reg acc[NH][J];
    for (int h = 0; h < NH; ++h)
        for (int j = 0; j < vecs; ++j) {
            const float* o = out + h * hd + d0 + j * W;
            acc[h][j] = first ? V::zero() : width(j) == W ? V::load(o) : V::load_tail(o, width(j));
        }
    for (int64_t s = s0; s < s1; ++s) {
        const float* r = rows[s] + d0;
        typename V::reg x[J];
        for (int j = 0; j < vecs; ++j)
            x[j] = width(j) == W ? V::load(r + j * W) : V::load_tail(r + j * W, width(j));
        for (int h = 0; h < NH; ++h) {
            const auto w = V::broadcast(p[h * n_rows + s]);
            for (int j = 0; j < vecs; ++j) acc[h][j] = V::fmadd(w, x[j], acc[h][j]);
        }
    }
    for (int h = 0; h < NH; ++h) {
        const auto k = V::broadcast(inv[h]);
        for (int j = 0; j < vecs; ++j) {
            float* o = out + h * hd + d0 + j * W;
            const auto v = last ? V::mul(acc[h][j], k) : acc[h][j];
            if (width(j) == W) V::store(o, v);
            else V::store_tail(o, v, width(j));
        }
    }
}

// Rows r0 .. r1 (of n_rows) into out, in tiles of 32: each row is read whole as one
// contiguous stream and every slice of the output reads the tile again from L1/L2 (slice by
// slice over all rows, each row was 8 short strided reads from L2 or L3). Accumulators pass
// through out between tiles: same sums, same bits. attention_bench, 64 heads x 512, 640
// scattered rows: 41 -> 74 GFLOP/s with the full-slice registers (tiles of 8: 59, of 16: 66).
template <class V, int NH>
void pv_block(const float* p /* [NH][n_rows] */, int hd, const float* const* rows, int64_t r0,
              int64_t r1, int64_t n_rows, const float* inv /* [NH] */, float* out /* [NH][hd] */) {
    constexpr int W = V::width, J = 4;
    constexpr int64_t kTile = 32;
    for (int64_t s0 = r0; s0 < r1; s0 += kTile) {
        const int64_t s1 = std::min(r1, s0 + kTile);
        const bool first = s0 == 0, last = s1 == n_rows;
        int d0 = 0;
        for (; d0 + J * W <= hd; d0 += J * W)
            pv_slice<V, NH, J, true>(p, n_rows, rows, s0, s1, hd, d0, first, last, inv, out);
        if (d0 < hd) pv_slice<V, NH, J, false>(p, n_rows, rows, s0, s1, hd, d0, first, last, inv, out);
    }
}

// softmax over each head's logits with its sink (when there is one) in the denominator only:
// p = exp(l - mx), inv = 1 / (exp(sink - mx) + sum p). Without a sink, n_rows >= 1.
template <int NH>
void softmax_block(float* l, int64_t n_rows, const float* sinks, float* inv) {
    for (int h = 0; h < NH; ++h) {
        float* lh = l + h * n_rows;
        float mx = sinks ? sinks[h] : -INFINITY;
        for (int64_t s = 0; s < n_rows; ++s) mx = std::max(mx, lh[s]);
        float denom = sinks ? std::exp(sinks[h] - mx) : 0.0f;
        for (int64_t s = 0; s < n_rows; ++s) {
            lh[s] = std::exp(lh[s] - mx);
            denom += lh[s];
        }
        inv[h] = 1.0f / denom;
    }
}

// The problem of one call: q [n_head][kd], out [n_head][vd].
struct AttnRows {
    const float* const* keys;    // [n_rows] -> [kd]
    const float* const* values;  // [n_rows] -> [vd]
    int64_t n_rows;
    int kd, vd;
};

// The sinks of heads h.. (none when sinks is null).
inline const float* sinks_from(const float* sinks, int h) { return sinks ? sinks + h : nullptr; }

template <class V, int NH>
void heads_block(const float* q, const AttnRows& r, const float* sinks, float scale, float* out, float* scratch) {
    float inv[NH];
    qk_block<V, NH>(q, r.kd, r.keys, 0, r.n_rows, r.n_rows, scale, scratch);
    softmax_block<NH>(scratch, r.n_rows, sinks, inv);
    pv_block<V, NH>(scratch, r.vd, r.values, 0, r.n_rows, r.n_rows, inv, out);
}

// Heads in blocks of 4 (then singles). Up to 512 KB of rows (256 at head_dim 512), which stay
// in L2, each head block runs QK, softmax and PV over all rows, its logits in L1. Beyond, the
// rows go in spans of 256 KB that every head block goes through before the next span, so they
// come from L2 for all but the first block (head block by head block over all rows, a 1.3 MB
// set of rows was streamed from L3 16 times; attention_bench at 640 and 1152 rows: +15-20%):
// QK of every head, then the softmaxes, then PV, scratch holding n_head x n_rows logits and
// then the n_head softmax normalizers. Either way, per (head, row) and (head, column) the
// operations and their order are those of one head at a time. (Spans are sized by the wider of
// key and value rows.)
template <class V>
void attend_heads(const float* q, int n_head, const AttnRows& r, const float* sinks, float scale, float* out,
                  float* scratch) {
    const int kd = r.kd, vd = r.vd;
    const int64_t n_rows = r.n_rows;
    const int64_t span = std::max<int64_t>(32, (int64_t(256) << 10) / (int64_t(std::max(kd, vd)) * 4));
    const int full = n_head / 4 * 4;
    if (n_rows <= 2 * span) {
        for (int h = 0; h < full; h += 4)
            heads_block<V, 4>(q + h * kd, r, sinks_from(sinks, h), scale, out + h * vd, scratch);
        for (int h = full; h < n_head; ++h)
            heads_block<V, 1>(q + h * kd, r, sinks_from(sinks, h), scale, out + h * vd, scratch);
        return;
    }
    for (int64_t r0 = 0; r0 < n_rows; r0 += span) {
        const int64_t r1 = std::min(n_rows, r0 + span);
        for (int h = 0; h < full; h += 4)
            qk_block<V, 4>(q + h * kd, kd, r.keys, r0, r1, n_rows, scale, scratch + h * n_rows);
        for (int h = full; h < n_head; ++h)
            qk_block<V, 1>(q + h * kd, kd, r.keys, r0, r1, n_rows, scale, scratch + h * n_rows);
    }
    float* invs = scratch + n_head * n_rows;
    for (int h = 0; h < n_head; ++h)
        softmax_block<1>(scratch + h * n_rows, n_rows, sinks_from(sinks, h), invs + h);
    for (int64_t r0 = 0; r0 < n_rows; r0 += span) {
        const int64_t r1 = std::min(n_rows, r0 + span);
        for (int h = 0; h < full; h += 4)
            pv_block<V, 4>(scratch + h * n_rows, vd, r.values, r0, r1, n_rows, invs + h, out + h * vd);
        for (int h = full; h < n_head; ++h)
            pv_block<V, 1>(scratch + h * n_rows, vd, r.values, r0, r1, n_rows, invs + h, out + h * vd);
    }
}

}  // namespace
