// IQ2_XXS x Q8_K dot, AVX2: per 32 values, four 8-byte codebook loads make the unsigned
// magnitudes, four 8-byte sign-table loads make a negate mask applied to the activations,
// vpmaddubsw (u8 magnitude <= 43 x s8, pairs in i16) and vpmaddwd with the group scale 2l+1.
#include "quant/x86_simd.h"  // first: see there

#include <cstring>

#include "quant/iq2_xxs/iq2_xxs.h"
#include "quant/iq2_xxs/iq2_xxs_grid.h"
#include "quant/iq2_xxs/iq2_xxs_simd.h"

namespace ds4::quant {

float dot_iq2_xxs_q8_k_avx2(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockIQ2_XXS*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    const uint64_t* grid = kIq2xxsGrid;
    const uint64_t* sign = kIq2xxsSignBytes.data();
    __m256 acc = _mm256_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const int8_t* q8 = a[b].qs;
        __m256i isum = _mm256_setzero_si256();
        for (int g = 0; g < 8; ++g) {
            uint32_t idx, aux;
            std::memcpy(&idx, x[b].qs + 4 * g, 4);
            std::memcpy(&aux, x[b].qs + 4 * g + 2, 4);
            const __m256i mag = _mm256_set_epi64x(
                int64_t(grid[idx >> 24]), int64_t(grid[(idx >> 16) & 255]),
                int64_t(grid[(idx >> 8) & 255]), int64_t(grid[idx & 255]));
            const __m256i neg = _mm256_set_epi64x(
                int64_t(sign[(aux >> 21) & 127]), int64_t(sign[(aux >> 14) & 127]),
                int64_t(sign[(aux >> 7) & 127]), int64_t(sign[aux & 127]));
            const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32 * g));
            const __m256i qs = _mm256_sub_epi8(_mm256_xor_si256(q, neg), neg);
            const __m256i p = _mm256_maddubs_epi16(mag, qs);
            const __m256i scale = _mm256_set1_epi16(int16_t(2 * (aux >> 28) + 1));
            isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, scale));
        }
        const float d = a[b].d * f16c_to_f32(x[b].d);
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum), acc);
    }
    return 0.125f * hsum_ps(acc);
}

}  // namespace ds4::quant
