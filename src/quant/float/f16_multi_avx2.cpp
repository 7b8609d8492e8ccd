// Multi-row F16 x F16 dots, AVX2: float_avx2.cpp's arithmetic per activation row (four 8-lane
// FMA accumulators over 32 values, an 8-lane step, the same horizontal sum, then a scalar
// tail), with each weight vector converted from f16 once for a tile of activation rows.
#include "quant/x86_simd.h"  // first: see there

#include "quant/float/float_formats.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"

namespace ds4::quant {
namespace {

inline __m256 load(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

struct Kernel {
    int64_t n;
    const uint16_t* const* act;

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const uint16_t*>(wp);
        const uint16_t* y[T];
        for (int t = 0; t < T; ++t) y[t] = act[t0 + t];
        __m256 a0[T], a1[T], a2[T], a3[T];
        for (int t = 0; t < T; ++t) a0[t] = a1[t] = a2[t] = a3[t] = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 32 <= n; i += 32) {
            const __m256 w0 = load(x + i), w1 = load(x + i + 8), w2 = load(x + i + 16),
                         w3 = load(x + i + 24);
            for (int t = 0; t < T; ++t) {
                a0[t] = _mm256_fmadd_ps(w0, load(y[t] + i), a0[t]);
                a1[t] = _mm256_fmadd_ps(w1, load(y[t] + i + 8), a1[t]);
                a2[t] = _mm256_fmadd_ps(w2, load(y[t] + i + 16), a2[t]);
                a3[t] = _mm256_fmadd_ps(w3, load(y[t] + i + 24), a3[t]);
            }
        }
        for (; i + 8 <= n; i += 8) {
            const __m256 w = load(x + i);
            for (int t = 0; t < T; ++t) a0[t] = _mm256_fmadd_ps(w, load(y[t] + i), a0[t]);
        }
        for (int t = 0; t < T; ++t) {
            float sum = hsum_ps(_mm256_add_ps(_mm256_add_ps(a0[t], a1[t]),
                                              _mm256_add_ps(a2[t], a3[t])));
            for (int64_t j = i; j < n; ++j) sum += f16c_to_f32(x[j]) * f16c_to_f32(y[t][j]);
            out[t] = sum;
        }
    }
};

}  // namespace

void multi_f16_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                    const void* const* act, int64_t n_act, float* const* y) {
    const Kernel k{n, reinterpret_cast<const uint16_t* const*>(act)};
    run_tiles<2>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
