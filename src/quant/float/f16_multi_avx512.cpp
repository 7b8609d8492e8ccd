// Multi-row F16 x F16 dots, AVX-512: float_avx512.cpp's arithmetic per (weight row, activation
// row) pair (four 16-lane FMA accumulators over 64 values, a 16-lane step, a masked tail, the
// same final sum), on a register tile of 2 weight rows x 3 activation rows: each f16 vector
// is converted once for the tile's 3 or 2 FMAs. The conversions, not the FMAs, bound these
// products (one per FMA for the activation side alone when each weight row runs over its own
// tile of activations): 2 x 3 needs 20 conversions per 24 FMAs, the 1 x 4 tile it replaces
// 20 per 16. In L2, one thread, 4096 columns, 12-48 tokens: 44 -> 50 GMAC/s.
#include "quant/x86_simd.h"  // first: see there

#include "quant/float/float_formats.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"

namespace ds4::quant {
namespace {

inline __m512 load(const uint16_t* p) {
    return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 load_tail(const uint16_t* p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// out[r][t] = dot(w[r], y[t]) for R weight rows and T activation rows.
template <int R, int T>
void tile(int64_t n, const uint16_t* const* w, const uint16_t* const* y, float (*out)[3]) {
    __m512 acc[R][T][4];
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t)
            for (int j = 0; j < 4; ++j) acc[r][t][j] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        for (int j = 0; j < 4; ++j) {
            __m512 wv[R];
            for (int r = 0; r < R; ++r) wv[r] = load(w[r] + i + 16 * j);
            for (int t = 0; t < T; ++t) {
                const __m512 a = load(y[t] + i + 16 * j);
                for (int r = 0; r < R; ++r) acc[r][t][j] = _mm512_fmadd_ps(wv[r], a, acc[r][t][j]);
            }
        }
    }
    for (; i + 16 <= n; i += 16) {
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = load(w[r] + i);
        for (int t = 0; t < T; ++t) {
            const __m512 a = load(y[t] + i);
            for (int r = 0; r < R; ++r) acc[r][t][0] = _mm512_fmadd_ps(wv[r], a, acc[r][t][0]);
        }
    }
    if (i < n) {
        const __mmask16 m = __mmask16((1u << (n - i)) - 1);
        __m512 wv[R];
        for (int r = 0; r < R; ++r) wv[r] = load_tail(w[r] + i, m);
        for (int t = 0; t < T; ++t) {
            const __m512 a = load_tail(y[t] + i, m);
            for (int r = 0; r < R; ++r) acc[r][t][1] = _mm512_fmadd_ps(wv[r], a, acc[r][t][1]);
        }
    }
    for (int r = 0; r < R; ++r)
        for (int t = 0; t < T; ++t)
            out[r][t] = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(acc[r][t][0], acc[r][t][1]),
                                                           _mm512_add_ps(acc[r][t][2], acc[r][t][3])));
}

template <int R>
void tile_rows(int64_t n, int T, const uint16_t* const* w, const uint16_t* const* y, float (*out)[3]) {
    if (T == 3) tile<R, 3>(n, w, y, out);
    else if (T == 2) tile<R, 2>(n, w, y, out);
    else tile<R, 1>(n, w, y, out);
}

}  // namespace

void multi_f16_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                      const void* const* act, int64_t n_act, float* const* y) {
    const auto* base = static_cast<const uint8_t*>(W);
    float out[2][3];
    // Tiles of activations outermost: a tile's rows stay in L1 while the weights stream past.
    for (int64_t t0 = 0, T = 0; t0 < n_act; t0 += T) {
        const int64_t left = n_act - t0;
        T = left == 4 ? 2 : left < 3 ? left : 3;  // 4 left: 2 + 2, not 3 + 1
        const uint16_t* a[3];
        for (int64_t t = 0; t < T; ++t) a[t] = static_cast<const uint16_t*>(act[t0 + t]);
        for (int64_t r = 0; r < rows; r += 2) {
            const int R = rows - r < 2 ? 1 : 2;
            if (r + R < rows) prefetch_row(base + size_t(r + R) * w_stride, size_t(R) * w_stride);
            const uint16_t* w[2] = {reinterpret_cast<const uint16_t*>(base + size_t(r) * w_stride),
                                    reinterpret_cast<const uint16_t*>(base + size_t(r + R - 1) * w_stride)};
            if (R == 2) tile_rows<2>(n, int(T), w, a, out);
            else tile_rows<1>(n, int(T), w, a, out);
            for (int i = 0; i < R; ++i)
                for (int64_t t = 0; t < T; ++t) y[t0 + t][r + i] = out[i][t];
        }
    }
}

}  // namespace ds4::quant
