// Multi-row F16 x F16 dots, AVX-512: float_avx512.cpp's arithmetic per activation row (four
// 16-lane FMA accumulators over 64 values, a 16-lane step, a masked tail, the same final
// sum), with each weight vector converted from f16 once for a tile of activation rows.
#include "quant/x86_simd.h"  // first: see there

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

struct Kernel {
    int64_t n;
    const uint16_t* const* act;

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const uint16_t*>(wp);
        const uint16_t* y[T];
        for (int t = 0; t < T; ++t) y[t] = act[t0 + t];
        __m512 a0[T], a1[T], a2[T], a3[T];
        for (int t = 0; t < T; ++t) a0[t] = a1[t] = a2[t] = a3[t] = _mm512_setzero_ps();
        int64_t i = 0;
        for (; i + 64 <= n; i += 64) {
            const __m512 w0 = load(x + i), w1 = load(x + i + 16), w2 = load(x + i + 32),
                         w3 = load(x + i + 48);
            for (int t = 0; t < T; ++t) {
                a0[t] = _mm512_fmadd_ps(w0, load(y[t] + i), a0[t]);
                a1[t] = _mm512_fmadd_ps(w1, load(y[t] + i + 16), a1[t]);
                a2[t] = _mm512_fmadd_ps(w2, load(y[t] + i + 32), a2[t]);
                a3[t] = _mm512_fmadd_ps(w3, load(y[t] + i + 48), a3[t]);
            }
        }
        for (; i + 16 <= n; i += 16) {
            const __m512 w = load(x + i);
            for (int t = 0; t < T; ++t) a0[t] = _mm512_fmadd_ps(w, load(y[t] + i), a0[t]);
        }
        if (i < n) {
            const __mmask16 m = __mmask16((1u << (n - i)) - 1);
            const __m512 w = load_tail(x + i, m);
            for (int t = 0; t < T; ++t) a1[t] = _mm512_fmadd_ps(w, load_tail(y[t] + i, m), a1[t]);
        }
        for (int t = 0; t < T; ++t)
            out[t] = _mm512_reduce_add_ps(
                _mm512_add_ps(_mm512_add_ps(a0[t], a1[t]), _mm512_add_ps(a2[t], a3[t])));
    }
};

}  // namespace

void multi_f16_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                      const void* const* act, int64_t n_act, float* const* y) {
    const Kernel k{n, reinterpret_cast<const uint16_t* const*>(act)};
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
