// The IQ2_XXS AVX-512 kernels' shared parts (include only from *_avx512.cpp, after
// x86_simd.h): the weight side of a block as four steps of 64 values (unsigned codebook
// magnitudes, a 64-bit negate mask, the groups' 2l+1 words), made by a decoder, and the dot
// and multi-row loops built on any decoder. Decoders: Iq2xxsLookupDecoder here (eight 8-byte
// codebook loads per step, sign bits by pdep), and the AVX512-VBMI one in
// iq2_xxs_vbmi_avx512.cpp. All produce the same bytes, and every kernel then forms the same
// i32 lanes per block (pairs of magnitude x signed activation, times 2l+1), so the results
// are identical whichever decoder and loop ran.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "quant/blocks.h"
#include "quant/iq2_xxs_grid.h"

namespace ds4::quant {

// One IQ2_XXS block decoded for the multi-row kernel: per step the signed weights and the
// 2l+1 words, the weight-only correction of the a + 128 activation packing, and d.
struct alignas(64) Iq2xxsDecodedBlock {
    uint8_t w[4][64];
    uint8_t scale[4][64];
    uint8_t corr[64];
    float d;
};

namespace {

// Step s of a block covers groups 2s (low 256 bits) and 2s+1 (high 256 bits).
struct Iq2xxsStep {
    __m512i mag;    // 64 unsigned magnitudes (8, 25 or 43)
    __mmask64 neg;  // values whose sign is negative
    __m512i scale;  // 2l+1 of the step's two groups, in every word of their half
};

// 64 sign bits for two groups: each 7-bit field spread to a byte, bit 7 = its parity.
inline uint64_t iq2xxs_sign_bits(uint32_t aux0, uint32_t aux1) {
    constexpr uint64_t kLow7 = 0x7f7f7f7f7f7f7f7full;
    const uint64_t fields = uint64_t(aux0 & 0x0fffffffu) | (uint64_t(aux1 & 0x0fffffffu) << 28);
    const uint64_t s = _pdep_u64(fields, kLow7);
    uint64_t p = s ^ (s >> 4);  // xor-fold each byte into its bit 0 (bit 7 of s is 0)
    p ^= p >> 2;
    p ^= p >> 1;
    return s | ((p & 0x0101010101010101ull) << 7);
}

// 2l+1 in the low word of every scale dword of the block (the l field is the top 4 bits).
inline __m512i iq2xxs_block_scales(__m512i codes) {
    return _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(codes, 28), 1), _mm512_set1_epi32(1));
}

// The step scales: group 2s's scale dword is dword 4s+1 of the block's 64 code bytes, i.e.
// word 8s+2; group 2s+1's is word 8s+6. vpermw spreads them over the two halves.
struct Iq2xxsScalePick {
    __m512i pick[4];
    Iq2xxsScalePick() {
        for (int s = 0; s < 4; ++s)
            pick[s] = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(8 * s + 2)),
                                         _mm256_set1_epi16(int16_t(8 * s + 6)), 1);
    }
};

struct Iq2xxsLookupDecoder {
    Iq2xxsScalePick scales;

    void block(const BlockIQ2_XXS& x, Iq2xxsStep* st) const {
        const __m512i ls = iq2xxs_block_scales(_mm512_loadu_si512(x.qs));
        const uint64_t* grid = kIq2xxsGrid;
        for (int s = 0; s < 4; ++s) {
            uint32_t w4[4];  // indices, signs+scale of group 2s, then of group 2s+1
            std::memcpy(w4, x.qs + 8 * s, 16);
            st[s].mag = _mm512_set_epi64(
                int64_t(grid[w4[2] >> 24]), int64_t(grid[(w4[2] >> 16) & 255]),
                int64_t(grid[(w4[2] >> 8) & 255]), int64_t(grid[w4[2] & 255]),
                int64_t(grid[w4[0] >> 24]), int64_t(grid[(w4[0] >> 16) & 255]),
                int64_t(grid[(w4[0] >> 8) & 255]), int64_t(grid[w4[0] & 255]));
            st[s].neg = _cvtu64_mask64(iq2xxs_sign_bits(w4[1], w4[3]));
            st[s].scale = _mm512_permutexvar_epi16(scales.pick[s], ls);
        }
    }
};

// One row against one Q8_K activation row: per step a masked subtract negates activation
// bytes, vpmaddubsw (u8 magnitude <= 43 x s8, pairs in i16) and vpdpwssd with the scales.
template <class Dec>
inline float iq2xxs_dot(const Dec& dec, int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockIQ2_XXS*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        Iq2xxsStep st[4];
        dec.block(x[b], st);
        __m512i isum = zero;
        for (int s = 0; s < 4; ++s) {
            const __m512i q = _mm512_loadu_si512(a[b].qs + 64 * s);
            const __m512i qs = _mm512_mask_sub_epi8(q, st[s].neg, zero, q);
            isum = _mm512_dpwssd_epi32(isum, _mm512_maddubs_epi16(st[s].mag, qs), st[s].scale);
        }
        const float d = a[b].d * f16c_to_f32(x[b].d);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(isum), acc);
    }
    return 0.125f * _mm512_reduce_add_ps(acc);
}

// The multi-row kernel (iq2_xxs_multi_avx512.cpp) decodes each weight row once into these
// blocks (in L1), then runs every tile of activation rows over them.
template <class Dec>
inline void iq2xxs_decode_row(const Dec& dec, int64_t nb, const BlockIQ2_XXS* x,
                              Iq2xxsDecodedBlock* out) {
    const __m512i zero = _mm512_setzero_si512(), bias = _mm512_set1_epi8(char(0x80));
    for (int64_t b = 0; b < nb; ++b) {
        Iq2xxsStep st[4];
        dec.block(x[b], st);
        __m512i corr = zero;
        for (int s = 0; s < 4; ++s) {
            const __m512i w = _mm512_mask_sub_epi8(st[s].mag, st[s].neg, zero, st[s].mag);
            corr = _mm512_dpwssd_epi32(corr, _mm512_maddubs_epi16(bias, w), st[s].scale);
            _mm512_store_si512(out[b].w[s], w);
            _mm512_store_si512(out[b].scale[s], st[s].scale);
        }
        _mm512_store_si512(out[b].corr, corr);
        out[b].d = f16c_to_f32(x[b].d);
    }
}

// A packed tile of T activation rows: codes [nb*4 steps][T][64] as unsigned bytes a + 128,
// block scales [nb][T]. Each row's lanes drop the block's weight-only term 128 * (scale-
// weighted weight pair sums): the same integers as the single kernel's, with a load,
// vpmaddubsw and vpdpwssd per step and row.
template <int T>
inline void iq2xxs_tile_decoded(int64_t nb, const Iq2xxsDecodedBlock* xd, const uint8_t* pa,
                                const float* ad, float* out) {
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        __m512i isum[T];
        for (int t = 0; t < T; ++t) isum[t] = zero;
        for (int s = 0; s < 4; ++s, pa += T * 64) {
            const __m512i w = _mm512_load_si512(xd[b].w[s]), sc = _mm512_load_si512(xd[b].scale[s]);
            for (int t = 0; t < T; ++t)
                isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(_mm512_loadu_si512(pa + t * 64), w), sc);
        }
        const __m512i corr = _mm512_load_si512(xd[b].corr);
        for (int t = 0; t < T; ++t)
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(ad[b * T + t] * xd[b].d),
                                     _mm512_cvtepi32_ps(_mm512_sub_epi32(isum[t], corr)), acc[t]);
    }
    for (int t = 0; t < T; ++t) out[t] = 0.125f * _mm512_reduce_add_ps(acc[t]);
}

}  // namespace
}  // namespace ds4::quant
