// AVX-512 VNNI MXFP4 x Q8_0 dot (compiled with -mavx512*; called only after CPU detection;
// no shared inline helpers included, see float/float_avx2.cpp).
//
// Two blocks per 512-bit register: the 16 code bytes of each block are broadcast to two
// 128-bit lanes, one lane keeps the low nibbles (values 0..15) and the other the high ones
// (16..31), matching the activation's byte order. One table shuffle gives the magnitudes
// (unsigned, for vpdpbusd) and bit 3 of the code, the sign, negates the activation byte.
// Scales of 8 blocks are converted at once as in q8_0/q8_0_avx512.cpp.
// GCC 12 warns falsely inside its own AVX-512 headers (_mm512_undefined_*, GCC PR105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "quant/blocks.h"
#include "quant/mxfp4/mxfp4.h"

namespace ds4::quant::avx512 {
namespace {

struct Consts {
    __m512i magnitudes, shifts, m4, sign_bit;
    Consts() {
        magnitudes = _mm512_broadcast_i32x4(
            _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12));
        // 16-bit shift counts per 128-bit lane: 0 (low nibbles), 4 (high), 0, 4.
        shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0,
                                   0x0004000400040004, 0x0004000400040004);
        m4 = _mm512_set1_epi8(0x0f);
        sign_bit = _mm512_set1_epi8(0x08);
    }
};

inline __m512i pair_products(const BlockMXFP4* x, const BlockQ8_0* y, const Consts& c) {
    const __m256i q0 = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[0].qs)));
    const __m256i q1 = _mm256_broadcastsi128_si256(
        _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[1].qs)));
    const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
    const __m512i codes = _mm512_and_si512(_mm512_srlv_epi16(q, c.shifts), c.m4);
    const __m512i mag = _mm512_shuffle_epi8(c.magnitudes, codes);
    const __m512i a = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[0].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[1].qs)), 1);
    const __m512i zero = _mm512_setzero_si512();
    const __m512i a_signed =
        _mm512_mask_sub_epi8(a, _mm512_test_epi8_mask(codes, c.sign_bit), zero, a);
    return _mm512_dpbusd_epi32(zero, mag, a_signed);
}

// 2^(e-128) * d_a for 8 consecutive blocks (see mxfp4_scale()), packed with pinsrb/pinsrw
// and converted at once (see q8_0/q8_0_avx512.cpp for why not one by one or by gathers).
inline __m256 scales8(const BlockMXFP4* x, const BlockQ8_0* y) {
    __m128i e = _mm_cvtsi32_si128(x[0].e);
    e = _mm_insert_epi8(e, x[1].e, 1);
    e = _mm_insert_epi8(e, x[2].e, 2);
    e = _mm_insert_epi8(e, x[3].e, 3);
    e = _mm_insert_epi8(e, x[4].e, 4);
    e = _mm_insert_epi8(e, x[5].e, 5);
    e = _mm_insert_epi8(e, x[6].e, 6);
    e = _mm_insert_epi8(e, x[7].e, 7);
    __m128i d = _mm_cvtsi32_si128(y[0].d);
    d = _mm_insert_epi16(d, y[1].d, 1);
    d = _mm_insert_epi16(d, y[2].d, 2);
    d = _mm_insert_epi16(d, y[3].d, 3);
    d = _mm_insert_epi16(d, y[4].d, 4);
    d = _mm_insert_epi16(d, y[5].d, 5);
    d = _mm_insert_epi16(d, y[6].d, 6);
    d = _mm_insert_epi16(d, y[7].d, 7);
    const __m256i e32 = _mm256_cvtepu8_epi32(e);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e32, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e32);
    const __m256i bits = _mm256_mask_mov_epi32(
        normal, _mm256_cmplt_epu32_mask(e32, _mm256_set1_epi32(2)), subnormal);
    return _mm256_mul_ps(_mm256_cvtph_ps(d), _mm256_castsi256_ps(bits));
}

inline float e8m0_half(uint8_t e) {
    const uint32_t bits = e >= 2 ? uint32_t(e - 1) << 23 : 0x00200000u << e;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

}  // namespace

float dot_mxfp4(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockMXFP4*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    const int64_t nb = n / kQK_MXFP4;
    const Consts c;
    __m512 acc0 = _mm512_setzero_ps(), acc1 = acc0;
    const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    int64_t b = 0;
    for (; b + 8 <= nb; b += 8) {
        const __m512 s = _mm512_castps256_ps512(scales8(x + b, y + b));
        for (int k = 0; k < 8; k += 4) {
            const __m512i p0 = pair_products(x + b + k, y + b + k, c);
            const __m512i p1 = pair_products(x + b + k + 2, y + b + k + 2, c);
            const __m512 s0 =
                _mm512_permutexvar_ps(_mm512_add_epi32(pick, _mm512_set1_epi32(k)), s);
            const __m512 s1 =
                _mm512_permutexvar_ps(_mm512_add_epi32(pick, _mm512_set1_epi32(k + 2)), s);
            acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), s0, acc0);
            acc1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), s1, acc1);
        }
    }
    // Remaining blocks: pairs with a scalar-built scale vector, then a last single block.
    for (; b + 2 <= nb; b += 2) {
        const float d0 = _cvtsh_ss(y[b].d) * e8m0_half(x[b].e);
        const float d1 = _cvtsh_ss(y[b + 1].d) * e8m0_half(x[b + 1].e);
        const __m512 s = _mm512_insertf32x8(_mm512_set1_ps(d0), _mm256_set1_ps(d1), 1);
        acc0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(pair_products(x + b, y + b, c)), s, acc0);
    }
    float sum = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
    if (b < nb) {
        int sumi = 0;
        for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
            sumi += kMxfp4Values[x[b].qs[j] & 15] * y[b].qs[j];
            sumi += kMxfp4Values[x[b].qs[j] >> 4] * y[b].qs[j + 16];
        }
        sum += float(sumi) * (_cvtsh_ss(y[b].d) * e8m0_half(x[b].e));
    }
    return sum;
}

}  // namespace ds4::quant::avx512
