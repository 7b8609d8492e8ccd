// Q2_K x Q8_K dot, AVX2: 32 codes per shift of a 32-byte load, vpmaddubsw (u8 codes x s8
// activations, pairs summed in i16; at most 2*3*128, no saturation) and vpmaddwd with the
// group scales (one per 16 values, spread across the two 128-bit lanes by vpshufb).
#include "quant/x86_simd.h"  // first: see there

#include "quant/q2_k/q2_k.h"

namespace ds4::quant {

float dot_q2_k_q8_k_avx2(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    const __m256i m3 = _mm256_set1_epi8(3);
    const __m128i m15 = _mm_set1_epi8(15);
    // For sub-block k (32 values = groups 2k, 2k+1): low lane words = scale byte 2k, high
    // lane words = scale byte 2k+1 (index 0x80 zeroes the upper byte of each word).
    __m256i spread[8];
    for (int k = 0; k < 8; ++k)
        spread[k] = _mm256_setr_epi8(
            char(2 * k), char(0x80), char(2 * k), char(0x80), char(2 * k), char(0x80),
            char(2 * k), char(0x80), char(2 * k), char(0x80), char(2 * k), char(0x80),
            char(2 * k), char(0x80), char(2 * k), char(0x80), char(2 * k + 1), char(0x80),
            char(2 * k + 1), char(0x80), char(2 * k + 1), char(0x80), char(2 * k + 1),
            char(0x80), char(2 * k + 1), char(0x80), char(2 * k + 1), char(0x80),
            char(2 * k + 1), char(0x80), char(2 * k + 1), char(0x80));
    __m256 acc = _mm256_setzero_ps(), acc_min = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m15));
        const __m256i msum = _mm256_madd_epi16(
            mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)));
        const __m256i scales = _mm256_broadcastsi128_si256(_mm_and_si128(sm, m15));
        const int8_t* q8 = a[b].qs;
        __m256i isum = _mm256_setzero_si256();
        for (int half = 0; half < 2; ++half) {
            const __m256i bits =
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * half));
            for (int j = 0; j < 4; ++j) {
                const __m256i codes = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
                const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8));
                q8 += 32;
                const __m256i p = _mm256_maddubs_epi16(codes, q);
                const __m256i s = _mm256_shuffle_epi8(scales, spread[4 * half + j]);
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s));
            }
        }
        const float d = a[b].d * f16c_to_f32(x[b].d), dmin = a[b].d * f16c_to_f32(x[b].dmin);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
        acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum), acc_min);
    }
    return hsum_ps(acc) - hsum_ps(acc_min);
}

}  // namespace ds4::quant
