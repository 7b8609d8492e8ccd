// The AVX512-VBMI decoder of IQ2_XXS blocks (iq2_xxs_vbmi.h). Per block of 256 values:
//   magnitudes: each codebook point is stored as 16 bits, 2 per value (0, 1, 2 for 8, 25, 43);
//     the block's 32 indices pick their points with four vpermt2w over the 512-byte table and
//     two blends on index bits 6-7; per step, vpermw puts point k in qword k, vpmultishiftqb
//     moves value j's 2 bits to byte j, and vpermb maps them to 8 / 25 / 43;
//   signs: the eight 4x7-bit sign fields are spread to bytes with vpermd/vpsrlvd/vpmovdb and
//     get their parity bit from a nibble table; qword s of the result is step s's mask;
//   scales: as the lookup decoder.
// The point codes are derived from the codebook (iq2_xxs_grid.h) at start-up, not stored.
//
// Everything after the target pragma is compiled for AVX512-VBMI and has internal linkage
// except the two entry points, which run only when the CPU has it.
#include "quant/x86_simd.h"  // first: see there

#include <cpuid.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>

#include "quant/blocks.h"
#include "quant/iq2_xxs_grid.h"
#include "quant/iq2_xxs_vbmi.h"

namespace ds4::quant {
namespace {

bool cpu_has_vbmi() {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & bit_AVX512VBMI);
}

std::atomic<bool> g_allow_vbmi{true};

// Point i's values as 2-bit codes: value j at bits 2j.
struct PointCodes {
    alignas(64) uint16_t code[256];
    PointCodes() {
        for (int i = 0; i < 256; ++i) {
            uint16_t c = 0;
            for (int j = 0; j < 8; ++j) {
                const uint8_t m = uint8_t(kIq2xxsGrid[i] >> (8 * j));
                c = uint16_t(c | ((m == 0x08 ? 0 : m == 0x19 ? 1 : 2) << (2 * j)));
            }
            code[i] = c;
        }
    }
};

}  // namespace

bool iq2xxs_vbmi_active() {
    static const bool has = cpu_has_vbmi();
    return has && g_allow_vbmi.load(std::memory_order_relaxed);
}

void iq2xxs_allow_vbmi(bool allow) { g_allow_vbmi.store(allow); }

}  // namespace ds4::quant

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vbmi"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512vbmi")
#endif

#include "quant/iq2_xxs_step_avx512.h"

namespace ds4::quant {
namespace {

struct VbmiDecoder {
    __m512i table[8];      // the 256 point codes, 32 per register
    __m512i index_pick;    // vpermb: word i <- index byte i (byte 8*(i/4) + i%4 of the block)
    __m512i point_pick[4]; // vpermw: qword k <- point 8s+k
    __m512i bit_offsets;   // vpmultishiftqb: byte j <- bits 2j.. of its qword
    __m512i magnitudes;    // vpermb: [c] = 8, 25, 43 for c & 3 = 0, 1, 2
    __m512i aux_lo, aux_hi, field_shift;
    __m256i nibble_parity; // 0x80 where the nibble has odd parity
    Iq2xxsScalePick scales;

    VbmiDecoder() {
        static const PointCodes codes;
        for (int q = 0; q < 8; ++q) table[q] = _mm512_load_si512(codes.code + 32 * q);
        alignas(64) uint8_t c[64];
        for (int i = 0; i < 32; ++i) {
            c[2 * i] = uint8_t(8 * (i / 4) + i % 4);
            c[2 * i + 1] = 0;
        }
        index_pick = _mm512_load_si512(c);
        for (int s = 0; s < 4; ++s) {
            alignas(64) uint16_t w[32];
            for (int i = 0; i < 32; ++i) w[i] = uint16_t(8 * s + i / 4);
            point_pick[s] = _mm512_load_si512(w);
        }
        for (int i = 0; i < 64; ++i) c[i] = uint8_t(2 * (i % 8));
        bit_offsets = _mm512_load_si512(c);
        const uint8_t mag[4] = {8, 25, 43, 0};
        for (int i = 0; i < 64; ++i) c[i] = mag[i & 3];
        magnitudes = _mm512_load_si512(c);
        aux_lo = _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
        aux_hi = _mm512_setr_epi32(9, 9, 9, 9, 11, 11, 11, 11, 13, 13, 13, 13, 15, 15, 15, 15);
        field_shift = _mm512_setr_epi32(0, 7, 14, 21, 0, 7, 14, 21, 0, 7, 14, 21, 0, 7, 14, 21);
        for (int i = 0; i < 32; ++i) c[i] = (__builtin_popcount(unsigned(i & 15)) & 1) ? 0x80 : 0;
        nibble_parity = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(c));
    }

    void block(const BlockIQ2_XXS& x, Iq2xxsStep* st) const {
        const __m512i codes = _mm512_loadu_si512(x.qs);
        // The 32 points' codes, word i for index i (groups of 4 per 32 values).
        const __m512i idx = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, index_pick, codes);
        const __m512i p0 = _mm512_permutex2var_epi16(table[0], idx, table[1]);
        const __m512i p1 = _mm512_permutex2var_epi16(table[2], idx, table[3]);
        const __m512i p2 = _mm512_permutex2var_epi16(table[4], idx, table[5]);
        const __m512i p3 = _mm512_permutex2var_epi16(table[6], idx, table[7]);
        const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x40));
        const __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x80));
        const __m512i points = _mm512_mask_blend_epi16(
            b7, _mm512_mask_blend_epi16(b6, p0, p1), _mm512_mask_blend_epi16(b6, p2, p3));
        // Sign bytes: field k of group g at byte 4g+k, bit 7 = the field's parity.
        const __m512i f7 = _mm512_set1_epi32(127);
        const __m512i flo = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_permutexvar_epi32(aux_lo, codes), field_shift), f7);
        const __m512i fhi = _mm512_and_si512(
            _mm512_srlv_epi32(_mm512_permutexvar_epi32(aux_hi, codes), field_shift), f7);
        const __m256i f = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi32_epi8(flo)),
                                                  _mm512_cvtepi32_epi8(fhi), 1);
        const __m256i n15 = _mm256_set1_epi8(15);
        const __m256i parity = _mm256_xor_si256(
            _mm256_shuffle_epi8(nibble_parity, _mm256_and_si256(f, n15)),
            _mm256_shuffle_epi8(nibble_parity, _mm256_and_si256(_mm256_srli_epi16(f, 4), n15)));
        alignas(32) uint64_t signs[4];  // mutable: _load_mask64 takes a non-const pointer
        _mm256_store_si256(reinterpret_cast<__m256i*>(signs), _mm256_or_si256(f, parity));
        const __m512i ls = iq2xxs_block_scales(codes);
        for (int s = 0; s < 4; ++s) {
            const __m512i pts = _mm512_permutexvar_epi16(point_pick[s], points);
            st[s].mag = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(bit_offsets, pts), magnitudes);
            st[s].neg = _load_mask64(reinterpret_cast<__mmask64*>(&signs[s]));
            st[s].scale = _mm512_permutexvar_epi16(scales.pick[s], ls);
        }
    }
};

const VbmiDecoder& decoder() {
    static const VbmiDecoder d;
    return d;
}

}  // namespace

float dot_iq2_xxs_q8_k_vbmi(int64_t n, const void* w, const void* act) {
    return iq2xxs_dot(decoder(), n, w, act);
}

void iq2xxs_decode_row_vbmi(int64_t nb, const void* row, Iq2xxsDecodedBlock* out) {
    iq2xxs_decode_row(decoder(), nb, static_cast<const BlockIQ2_XXS*>(row), out);
}

}  // namespace ds4::quant

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
