// The row/tile loops shared by the multi-row kernels (*_multi_<isa>.cpp only; internal linkage
// on purpose, see x86_simd.h).
//
// run_tiles: a kernel object K provides
//   template <int T> void tile(const uint8_t* w, int64_t t0, float* out) const;
// computing the dots of one weight row with activations t0 .. t0+T-1 into out[0..T).
//
// run_packed_tiles: K instead packs each tile of activation rows once, interleaved so that
// one pointer and constant offsets reach every row of the tile (few registers, one stream):
//   void pack(const void* const* act, int T);       // the tile's T activation rows
//   template <int T> void tile(const uint8_t* w, float* out) const;  // uses the packed tile
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/prefetch.h"

namespace ds4::quant {
namespace {

// Asks for every cache line of the next weight row while this one is computed: the kernels
// use a row for long enough that the hardware prefetcher, which ramps up per stream, leaves
// the first blocks of each row as DRAM stalls (measured: 40% of the batched Q2_K kernel's
// time and 70% of the IQ2_XXS decoder's in a 512-token prefill).
inline void prefetch_row(const uint8_t* row, size_t bytes) {
    for (size_t off = 0; off < bytes; off += 64) _mm_prefetch(reinterpret_cast<const char*>(row + off), _MM_HINT_T0);
}

// Runs k.tile<T> for T = rem (1 <= rem <= kMax) with a compile-time T.
template <class K, int kMax, class... Args>
inline void tile_tail(const K& k, int64_t rem, Args... args) {
    if constexpr (kMax >= 1) {
        if (rem == kMax) return k.template tile<kMax>(args...);
        tile_tail<K, kMax - 1>(k, rem, args...);
    }
}

// For every weight row r and activation t: y[t][r] = dot(row r, act t). Tiles of activations
// are outermost: a tile's rows stay in L1 while the weight rows stream past from L2.
template <int kMaxT, class K>
inline void run_tiles(const K& k, const void* W, size_t w_stride, int64_t rows, int64_t n_act,
                      float* const* y) {
    const auto* base = static_cast<const uint8_t*>(W);
    float out[kMaxT];
    for (int64_t t = 0; t < n_act; t += kMaxT) {
        const int64_t m = n_act - t < kMaxT ? n_act - t : kMaxT;
        for (int64_t r = 0; r < rows; ++r) {
            if (r + 1 < rows) prefetch_row(base + size_t(r + 1) * w_stride, w_stride);
            if (m == kMaxT) k.template tile<kMaxT>(base + size_t(r) * w_stride, t, out);
            else tile_tail<K, kMaxT - 1>(k, m, base + size_t(r) * w_stride, t, out);
            for (int64_t i = 0; i < m; ++i) y[t + i][r] = out[i];
        }
    }
}

template <int kMaxT, class K>
inline void run_packed_tiles(K& k, const void* W, size_t w_stride, int64_t rows,
                             const void* const* act, int64_t n_act, float* const* y) {
    const auto* base = static_cast<const uint8_t*>(W);
    float out[kMaxT];
    for (int64_t t = 0; t < n_act; t += kMaxT) {
        const int64_t m = n_act - t < kMaxT ? n_act - t : kMaxT;
        k.pack(act + t, int(m));
        for (int64_t r = 0; r < rows; ++r) {
            if (r + 1 < rows) prefetch_row(base + size_t(r + 1) * w_stride, w_stride);
            if (m == kMaxT) k.template tile<kMaxT>(base + size_t(r) * w_stride, out);
            else tile_tail<K, kMaxT - 1>(k, m, base + size_t(r) * w_stride, out);
            for (int64_t i = 0; i < m; ++i) y[t + i][r] = out[i];
        }
    }
}

}  // namespace
}  // namespace ds4::quant
