// AVX-512 VNNI Q8_0 x Q8_0 dot (compiled with -mavx512*; called only after CPU detection;
// no shared inline helpers included, see float_avx2.cpp).
//
// Two blocks per 512-bit register. vpdpbusd multiplies unsigned by signed bytes, so the
// weight's sign moves onto the activation: |w| * (w < 0 ? -a : a). The per-block scales
// cost as much as the products if converted one by one (measured: 0.82 ns/block with
// scalar f16 conversions, 1.03 with 16-wide gathers, 0.70 like this, 0.44 with no scale
// work at all), so the 8 f16 scales of 8 blocks are packed into one vector with pinsrw,
// converted and multiplied at once, and each pair of blocks picks its two with a permute.
// GCC 12 warns falsely inside its own AVX-512 headers (_mm512_undefined_*, GCC PR105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "quant/blocks.h"
#include "quant/q8_0.h"

namespace ds4::quant::avx512 {
namespace {

// 16 int32 partial sums: lanes 0-7 for block 0, lanes 8-15 for block 1.
inline __m512i pair_products(const BlockQ8_0* x, const BlockQ8_0* y) {
    const __m512i w = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[0].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[1].qs)), 1);
    const __m512i a = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[0].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[1].qs)), 1);
    const __m512i zero = _mm512_setzero_si512();
    const __m512i a_signed = _mm512_mask_sub_epi8(a, _mm512_movepi8_mask(w), zero, a);
    return _mm512_dpbusd_epi32(zero, _mm512_abs_epi8(w), a_signed);
}

// The 8 f16 scales of blocks x[0..7], packed in order.
inline __m128i scales8(const BlockQ8_0* x) {
    __m128i d = _mm_cvtsi32_si128(x[0].d);
    d = _mm_insert_epi16(d, x[1].d, 1);
    d = _mm_insert_epi16(d, x[2].d, 2);
    d = _mm_insert_epi16(d, x[3].d, 3);
    d = _mm_insert_epi16(d, x[4].d, 4);
    d = _mm_insert_epi16(d, x[5].d, 5);
    d = _mm_insert_epi16(d, x[6].d, 6);
    return _mm_insert_epi16(d, x[7].d, 7);
}

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

}  // namespace

float dot_q8_0(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    const int64_t nb = n / kQK8_0;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    // Scale lane selector of the pair starting at block k of 8: [k x8, k+1 x8].
    const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const __m512 s = _mm512_castps256_ps512(
            _mm256_mul_ps(_mm256_cvtph_ps(scales8(x + b)), _mm256_cvtph_ps(scales8(y + b))));
        for (int k = 0; k < 8; k += 4) {
            const __m512i p0 = pair_products(x + b + k, y + b + k);
            const __m512i p1 = pair_products(x + b + k + 2, y + b + k + 2);
            const __m512 s0 =
                _mm512_permutexvar_ps(_mm512_add_epi32(pick, _mm512_set1_epi32(k)), s);
            const __m512 s1 =
                _mm512_permutexvar_ps(_mm512_add_epi32(pick, _mm512_set1_epi32(k + 2)), s);
            acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), s0, acc0);
            acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), s1, acc1);
        }
    }
    // Fewer than 8 blocks left: one at a time with 256-bit VNNI.
    __m256 tail = _mm256_setzero_ps();
    for (; b < nb; ++b) {
        const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
        const __m256i aq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[b].qs));
        const __m256i p = _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm256_abs_epi8(wq),
                                              _mm256_sign_epi8(aq, wq));
        const float d = _cvtsh_ss(x[b].d) * _cvtsh_ss(y[b].d);
        tail = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(d), tail);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1)) + hsum(tail);
}

}  // namespace ds4::quant::avx512
