// AVX2 Q8_0 x Q8_0 dot (compiled with -mavx2; called only after CPU detection; no shared
// inline helpers included, see float_avx2.cpp).
//
// Per block: |w| (unsigned) times a*sign(w) (signed) with maddubs -> int16 pairs (at most
// 2*128*127, no saturation), madd with ones -> 8 int32, then one FMA with the block scale.
// (Converting the scales 8 blocks at a time, as the AVX-512 kernel does, measured no faster
// here.)
#include <immintrin.h>

#include "quant/blocks.h"
#include "quant/q8_0.h"

namespace ds4::quant::avx2 {
namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float scale(const BlockQ8_0& x, const BlockQ8_0& y) {
    return _cvtsh_ss(x.d) * _cvtsh_ss(y.d);
}

inline __m256 block_products(const BlockQ8_0& x, const BlockQ8_0& y) {
    const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

}  // namespace

float dot_q8_0(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    const int64_t nb = n / kQK8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scale(x[b], y[b])), block_products(x[b], y[b]),
                               acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(scale(x[b + 1], y[b + 1])),
                               block_products(x[b + 1], y[b + 1]), acc1);
    }
    if (b < nb)
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(scale(x[b], y[b])), block_products(x[b], y[b]),
                               acc0);
    return hsum(_mm256_add_ps(acc0, acc1));
}

}  // namespace ds4::quant::avx2
