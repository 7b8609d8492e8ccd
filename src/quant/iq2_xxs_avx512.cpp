// IQ2_XXS x Q8_K dot, AVX-512 VNNI: 64 values (two groups) per step. Eight 8-byte codebook
// loads (faster here than vpgatherqq) make the unsigned magnitudes; the 64 sign bits (7 stored
// + parity per 8 values) are built with pdep in a mask register and negate activation bytes
// with one masked subtract; vpmaddubsw (u8 magnitude <= 43 x s8, pairs in i16) and vpdpwssd
// with the groups' 2l+1 (picked from the block's code bytes by vpermw). Measured on one core
// here: 6.8 GB/s of weights, vs 5.4 with per-step scale broadcasts and 5.0 with a gather.
#include "quant/x86_simd.h"  // first: see there

#include <cstring>

#include "quant/iq2_xxs.h"
#include "quant/iq2_xxs_grid.h"

namespace ds4::quant {
namespace {

// 64 sign bits for two groups: each 7-bit field spread to a byte, bit 7 = its parity.
inline uint64_t sign_bits(uint32_t aux0, uint32_t aux1) {
    constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7full;
    const uint64_t fields = uint64_t(aux0 & 0x0fffffffu) | (uint64_t(aux1 & 0x0fffffffu) << 28);
    const uint64_t s = _pdep_u64(fields, kLow7);
    uint64_t p = s ^ (s >> 4);  // xor-fold each byte into its bit 0 (bit 7 of s is 0)
    p ^= p >> 2;
    p ^= p >> 1;
    return s | ((p & 0x0101010101010101ull) << 7);
}

}  // namespace

float dot_iq2_xxs_q8_k_avx512(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockIQ2_XXS*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    const uint64_t* grid = kIq2xxsGrid;
    // Step s covers groups 2s and 2s+1, whose scale dwords are dwords 4s+1 and 4s+3 of the
    // block's 64 code bytes, i.e. words 8s+2 and 8s+6: vpermw spreads them over the two halves.
    __m512i scale_pick[4];
    for (int s = 0; s < 4; ++s)
        scale_pick[s] = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(8 * s + 2)),
                                           _mm256_set1_epi16(int16_t(8 * s + 6)), 1);
    const __m512i one = _mm512_set1_epi32(1);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const int8_t* q8 = a[b].qs;
        const __m512i codes = _mm512_loadu_si512(x[b].qs);
        // 2l+1 in the low word of every scale dword (the l field is the top 4 bits)
        const __m512i ls = _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(codes, 28), 1), one);
        __m512i isum = _mm512_setzero_si512();
        for (int s = 0; s < 4; ++s) {
            uint32_t w4[4];  // indices, signs+scale of group 2s, then of group 2s+1
            std::memcpy(w4, x[b].qs + 8 * s, 16);
            const __m512i mag = _mm512_set_epi64(
                int64_t(grid[w4[2] >> 24]), int64_t(grid[(w4[2] >> 16) & 255]),
                int64_t(grid[(w4[2] >> 8) & 255]), int64_t(grid[w4[2] & 255]),
                int64_t(grid[w4[0] >> 24]), int64_t(grid[(w4[0] >> 16) & 255]),
                int64_t(grid[(w4[0] >> 8) & 255]), int64_t(grid[w4[0] & 255]));
            const __mmask64 neg = _cvtu64_mask64(sign_bits(w4[1], w4[3]));
            const __m512i q = _mm512_loadu_si512(q8 + 64 * s);
            const __m512i qs = _mm512_mask_sub_epi8(q, neg, _mm512_setzero_si512(), q);
            const __m512i p = _mm512_maddubs_epi16(mag, qs);
            isum = _mm512_dpwssd_epi32(isum, p, _mm512_permutexvar_epi16(scale_pick[s], ls));
        }
        const float d = a[b].d * f16c_to_f32(x[b].d);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(isum), acc);
    }
    return 0.125f * _mm512_reduce_add_ps(acc);
}

}  // namespace ds4::quant
