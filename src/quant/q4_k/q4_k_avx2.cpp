// Q4_K x Q8_K dot, AVX2: low and high nibbles of a 32-byte load are two sub-blocks of 32
// codes; vpmaddubsw (u8 codes x s8 activations, pairs in i16, at most 2*15*128) then
// vpmaddwd with the sub-block scale broadcast to words; the min term uses the activation's
// 16-value sums (bsums).
#include "quant/x86_simd.h"  // first: see there

#include "quant/q4_k/q4_k.h"
#include "quant/q4_k/q4_k_scales.h"

namespace ds4::quant {

float dot_q4_k_q8_k_avx2(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ4_K*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    const __m256i m15 = _mm256_set1_epi8(15);
    __m256i spread[8];  // word-broadcast of scale byte j
    for (int j = 0; j < 8; ++j) spread[j] = _mm256_set1_epi16(int16_t(0x8000 | j));
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const Q4KScales s = q4_k_unpack_scales(x[b].scales);
        const __m128i mn8 = _mm_cvtsi64_si128(int64_t(s.mn));
        // mins twice each, to pair with the two 16-value bsums of every sub-block
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
        const __m256i msum = _mm256_madd_epi16(
            mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)));
        const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtsi64_si128(int64_t(s.sc)));
        const int8_t* q8 = a[b].qs;
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            const __m256i bits =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * c));
            const __m256i lo = _mm256_and_si256(bits, m15);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), m15);
            const __m256i plo = _mm256_maddubs_epi16(
                lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 64 * c)));
            const __m256i phi = _mm256_maddubs_epi16(
                hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 64 * c + 32)));
            isum = _mm256_add_epi32(
                isum, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(scales, spread[2 * c])));
            isum = _mm256_add_epi32(
                isum, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(scales, spread[2 * c + 1])));
        }
        const float d = a[b].d * f16c_to_f32(x[b].d), dmin = a[b].d * f16c_to_f32(x[b].dmin);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum), acc_min);
    }
    return hsum_ps(acc) - hsum_ps(acc_min);
}

}  // namespace ds4::quant
