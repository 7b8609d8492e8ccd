// Multi-row MXFP4 x Q8_0 dots, AVX2: mxfp4_avx2.cpp's arithmetic per activation row (one table
// shuffle per nibble half, |w| * a*sign(w) with vpmaddubsw and vpmaddwd, two accumulators over
// alternating blocks), with the unpacked weights and exponent made once per tile. The
// activations' f16 scales are converted once per call (exactly).
#include "quant/x86_simd.h"  // first: see there

#include <vector>

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/mxfp4/mxfp4.h"

namespace ds4::quant {
namespace {

inline float e8m0_half(uint8_t e) {  // 2^(e-128), see mxfp4_scale()
    const uint32_t bits = e >= 2 ? uint32_t(e - 1) << 23 : 0x00200000u << e;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

struct Kernel {
    int64_t nb;
    const BlockQ8_0* const* act;
    const float* ascale;  // [n_act][nb]
    __m128i table;

    template <int T>
    void block(const BlockMXFP4& x, const BlockQ8_0* const* y, const float* const* ys, int64_t b,
               __m256* acc) const {
        const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs));
        const __m128i m4 = _mm_set1_epi8(0x0f);
        const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m4));
        const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
        const __m256i w = _mm256_set_m128i(hi, lo);
        const __m256i wabs = _mm256_sign_epi8(w, w);
        const float e = e8m0_half(x.e);
        for (int t = 0; t < T; ++t) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs));
            const __m256i p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, w));
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(ys[t][b] * e), p, acc[t]);
        }
    }

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockMXFP4*>(wp);
        const BlockQ8_0* y[T];
        const float* ys[T];
        for (int t = 0; t < T; ++t) {
            y[t] = act[t0 + t];
            ys[t] = ascale + (t0 + t) * nb;
        }
        __m256 acc0[T], acc1[T];
        for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2) {
            block<T>(x[b], y, ys, b, acc0);
            block<T>(x[b + 1], y, ys, b + 1, acc1);
        }
        if (b < nb) block<T>(x[b], y, ys, b, acc0);
        for (int t = 0; t < T; ++t) out[t] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));
    }
};

}  // namespace

void multi_mxfp4_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                      const void* const* act, int64_t n_act, float* const* y) {
    const int64_t nb = n / kQK_MXFP4;
    thread_local std::vector<float> ascale;
    ascale.resize(size_t(n_act * nb));
    for (int64_t t = 0; t < n_act; ++t) {
        const auto* a = static_cast<const BlockQ8_0*>(act[t]);
        for (int64_t b = 0; b < nb; ++b) ascale[size_t(t * nb + b)] = _cvtsh_ss(a[b].d);
    }
    const Kernel k{nb, reinterpret_cast<const BlockQ8_0* const*>(act), ascale.data(),
                   _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values))};
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
