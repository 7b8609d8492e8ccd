// AVX2 MXFP4 x Q8_0 dot (compiled with -mavx2; called only after CPU detection; no shared
// inline helpers included, see float/float_avx2.cpp).
//
// Per block: the 32 nibbles become signed int8 values with one 16-entry table shuffle, then
// the same |w| * a*sign(w) maddubs/madd path as q8_0/q8_0_avx2.cpp. (Converting the scales 8
// blocks at a time, as the AVX-512 kernel does, measured no faster here: the nibble work
// dominates.)
#include <immintrin.h>

#include "quant/blocks.h"
#include "quant/mxfp4/mxfp4.h"

namespace ds4::quant::avx2 {
namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline float e8m0_half(uint8_t e) {  // 2^(e-128), see mxfp4_scale()
    const uint32_t bits = e >= 2 ? uint32_t(e - 1) << 23 : 0x00200000u << e;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

inline __m256 block_products(const BlockMXFP4& x, const BlockQ8_0& y, __m128i table) {
    const __m128i q = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x.qs));
    const __m128i m4 = _mm_set1_epi8(0x0f);
    const __m128i lo = _mm_shuffle_epi8(table, _mm_and_si128(q, m4));
    const __m128i hi = _mm_shuffle_epi8(table, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
    const __m256i w = _mm256_set_m128i(hi, lo);
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y.qs));
    const __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(a, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

}  // namespace

float dot_mxfp4(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockMXFP4*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    const int64_t nb = n / kQK_MXFP4;
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kMxfp4Values));
    __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const float d0 = _cvtsh_ss(y[b].d) * e8m0_half(x[b].e);
        const float d1 = _cvtsh_ss(y[b + 1].d) * e8m0_half(x[b + 1].e);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d0), block_products(x[b], y[b], table), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_set1_ps(d1), block_products(x[b + 1], y[b + 1], table),
                               acc1);
    }
    if (b < nb) {
        const float d0 = _cvtsh_ss(y[b].d) * e8m0_half(x[b].e);
        acc0 = _mm256_fmadd_ps(_mm256_set1_ps(d0), block_products(x[b], y[b], table), acc0);
    }
    return hsum(_mm256_add_ps(acc0, acc1));
}

}  // namespace ds4::quant::avx2
