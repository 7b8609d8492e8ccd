// Q4_K x Q8_K dot, AVX-512 VNNI: a 32-byte code load broadcast to both zmm halves and shifted
// by 0 / 4 bits (vpsrlvw) gives the 64 codes of sub-blocks 2c and 2c+1 in activation order;
// vpmaddubsw makes i16 pair sums and vpdpwssd applies the two sub-block scales.
#include "quant/x86_simd.h"  // first: see there

#include "quant/q4_k/q4_k.h"
#include "quant/q4_k/q4_k_scales.h"

namespace ds4::quant {

float dot_q4_k_q8_k_avx512(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ4_K*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    const __m512i m15 = _mm512_set1_epi8(15);
    const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
    __m512i spread[4];  // low 256 bits: words of scale byte 2c; high 256 bits: byte 2c+1
    for (int c = 0; c < 4; ++c)
        spread[c] = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(0x8000 | (2 * c))),
                                       _mm256_set1_epi16(int16_t(0x8000 | (2 * c + 1))), 1);
    __m512 acc = _mm512_setzero_ps();
    __m256 acc_min = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const Q4KScales s = q4_k_unpack_scales(x[b].scales);
        const __m128i mn8 = _mm_cvtsi64_si128(int64_t(s.mn));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
        const __m256i msum = _mm256_madd_epi16(
            mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)));
        const __m512i scales = _mm512_broadcast_i32x4(_mm_cvtsi64_si128(int64_t(s.sc)));
        __m512i isum = _mm512_setzero_si512();
        for (int c = 0; c < 4; ++c) {
            const __m512i bits = _mm512_broadcast_i64x4(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * c)));
            const __m512i codes = _mm512_and_si512(_mm512_srlv_epi16(bits, shift), m15);
            const __m512i p = _mm512_maddubs_epi16(codes, _mm512_loadu_si512(a[b].qs + 64 * c));
            isum = _mm512_dpwssd_epi32(isum, p, _mm512_shuffle_epi8(scales, spread[c]));
        }
        const float d = a[b].d * f16c_to_f32(x[b].d), dmin = a[b].d * f16c_to_f32(x[b].dmin);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(isum), acc);
        acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum), acc_min);
    }
    return _mm512_reduce_add_ps(acc) - hsum_ps(acc_min);
}

}  // namespace ds4::quant
