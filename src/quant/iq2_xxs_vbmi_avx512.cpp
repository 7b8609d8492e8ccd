// The AVX512-VBMI decoder of IQ2_XXS blocks (iq2_xxs_vbmi.h), in the AVX-512 kernels' value
// step order (Iq2xxsStepOrder::kValues, iq2_xxs_step_avx512.h). Per block of 256 values:
//   magnitudes: each codebook point is stored as 16 bits, 2 per value (0, 1, 2 for 8, 25, 43),
//     values 0-3 in its low byte and 4-7 in its high byte; the block's 32 indices pick their
//     points with four vpermt2w over the 512-byte table and two blends on index bits 6-7,
//     which leaves point k of group g in bytes 8g + 2k (+1); per step j one vgf2p8affineqb
//     maps every byte's bits 2j, 2j+1 (code c = b0 + 2 b1) to 8 ^ 17 b0 ^ 35 b1 = 8, 25, 43:
//     the magnitude of value j (low byte) or j + 4 (high byte), affine over GF(2);
//   signs: vpmultishiftqb puts the 7-bit sign field k of group g in byte 8g + k, vpermi2b
//     maps it to its 8-bit mask (the parity bit added) through the 128-byte table, and per
//     step j one vpshufbitqmb (AVX512-BITALG) picks bit j + 4h of field k into mask bit
//     8g + 2k + h (no trip through general registers).
// The scales come per pair of blocks (iq2xxs_pair_scales).
// The point codes are derived from the codebook (iq2_xxs_grid.h) at start-up, not stored.
//
// Everything after the target pragma is compiled for AVX512-VBMI, -BITALG and GFNI and has
// internal linkage except the entry points, which run only when the CPU has all three.
#include "quant/x86_simd.h"  // first: see there

#include <cpuid.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "quant/blocks.h"
#include "quant/iq2_xxs_grid.h"
#include "quant/iq2_xxs_vbmi.h"

namespace ds4::quant {
namespace {

bool cpu_has_vbmi() {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & bit_AVX512VBMI) && (c & bit_AVX512BITALG) &&
           (c & bit_GFNI);
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
#pragma clang attribute push(__attribute__((target("avx512vbmi,avx512bitalg,gfni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512vbmi,avx512bitalg,gfni")
#endif

#include "quant/iq2_xxs_step_avx512.h"

namespace ds4::quant {
namespace {

// Step j's vgf2p8affineqb matrix: output bit i comes from byte 7 - i, and 8 ^ 17 b0 ^ 35 b1
// (b0, b1 = bits 2j, 2j+1) sets bit 0 from b0 ^ b1, bit 1 from b1, bit 4 from b0, bit 5 from
// b1, the constant 8 bit 3.
constexpr uint64_t magnitude_matrix(int j) {
    return (uint64_t(0b11) << (56 + 2 * j)) | (uint64_t(0b10) << (48 + 2 * j)) |
           (uint64_t(0b01) << (24 + 2 * j)) | (uint64_t(0b10) << (16 + 2 * j));
}

struct VbmiDecoder {
    static constexpr Iq2xxsStepOrder kOrder = Iq2xxsStepOrder::kValues;
    __m512i table[8];      // the 256 point codes, 32 per register
    __m512i index_pick;    // vpermb: word i <- index byte i (byte 8*(i/4) + i%4 of the block)
    __m512i field_offsets; // vpmultishiftqb: byte 8g+k <- bits 32+7k.. of qword g (aux of g)
    __m512i sign_masks[2]; // kIq2xxsSignMasks, 64 entries per register
    __m512i sign_bits[4];  // vpshufbitqmb for step j: bit 8g+2k+h <- bit 8k+j+4h of qword g

    VbmiDecoder() {
        static const PointCodes codes;
        for (int q = 0; q < 8; ++q) table[q] = _mm512_load_si512(codes.code + 32 * q);
        alignas(64) uint8_t c[64];
        for (int i = 0; i < 32; ++i) {
            c[2 * i] = uint8_t(8 * (i / 4) + i % 4);
            c[2 * i + 1] = 0;
        }
        index_pick = _mm512_load_si512(c);
        for (int i = 0; i < 64; ++i) c[i] = uint8_t(i % 8 < 4 ? 32 + 7 * (i % 8) : 0);
        field_offsets = _mm512_load_si512(c);
        sign_masks[0] = _mm512_loadu_si512(kIq2xxsSignMasks.data());
        sign_masks[1] = _mm512_loadu_si512(kIq2xxsSignMasks.data() + 64);
        for (int j = 0; j < 4; ++j) {
            for (int i = 0; i < 64; ++i) c[i] = uint8_t(8 * ((i % 8) / 2) + j + 4 * (i % 2));
            sign_bits[j] = _mm512_load_si512(c);
        }
    }

    void block(const BlockIQ2_XXS& x, Iq2xxsSteps& st) const {
        const __m512i codes = _mm512_loadu_si512(x.qs);
        // The 32 points' codes, word i for index i (group i / 4, chunk i % 4).
        const __m512i idx = _mm512_maskz_permutexvar_epi8(0x5555555555555555ull, index_pick, codes);
        const __m512i p0 = _mm512_permutex2var_epi16(table[0], idx, table[1]);
        const __m512i p1 = _mm512_permutex2var_epi16(table[2], idx, table[3]);
        const __m512i p2 = _mm512_permutex2var_epi16(table[4], idx, table[5]);
        const __m512i p3 = _mm512_permutex2var_epi16(table[6], idx, table[7]);
        const __mmask32 b6 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x40));
        const __mmask32 b7 = _mm512_test_epi16_mask(idx, _mm512_set1_epi16(0x80));
        const __m512i points = _mm512_mask_blend_epi16(
            b7, _mm512_mask_blend_epi16(b6, p0, p1), _mm512_mask_blend_epi16(b6, p2, p3));
        // Sign masks: byte 8g + k <- the 8-bit mask of field k of group g (vpermi2b reads 7
        // index bits).
        const __m512i signs = _mm512_permutex2var_epi8(
            sign_masks[0], _mm512_multishift_epi64_epi8(field_offsets, codes), sign_masks[1]);
        for (int j = 0; j < 4; ++j) {
            const __m512i matrix = _mm512_set1_epi64(int64_t(magnitude_matrix(j)));
            st.mag[j] = _mm512_gf2p8affine_epi64_epi8(points, matrix, 8);
            st.neg[j] = _mm512_bitshuffle_epi64_mask(signs, sign_bits[j]);
        }
    }
};

const VbmiDecoder& decoder() {
    static const VbmiDecoder d;
    return d;
}

}  // namespace

Iq2xxsStepOrder iq2xxs_vbmi_order() { return VbmiDecoder::kOrder; }

void iq2xxs_order_values_vbmi(const BlockQ8_K& a, Iq2xxsActBlock& out) {
    // Byte 8g + 2k + h of step j <- value 32g + 8k + j + 4h: groups 0-3 from the block's first
    // 128 bytes, 4-7 from the second, with the same 7-bit index.
    static const struct Pick {
        __m512i idx[4];
        Pick() {
            alignas(64) uint8_t c[64];
            for (int j = 0; j < 4; ++j) {
                for (int p = 0; p < 64; ++p) {
                    const int g = p / 8, k = (p % 8) / 2, h = p % 2;
                    c[p] = uint8_t(32 * (g % 4) + 8 * k + j + 4 * h);
                }
                idx[j] = _mm512_load_si512(c);
            }
        }
    } pick;
    const __m512i z0 = _mm512_loadu_si512(a.qs), z1 = _mm512_loadu_si512(a.qs + 64);
    const __m512i z2 = _mm512_loadu_si512(a.qs + 128), z3 = _mm512_loadu_si512(a.qs + 192);
    for (int j = 0; j < 4; ++j) {
        const __m512i lo = _mm512_permutex2var_epi8(z0, pick.idx[j], z1);  // groups 0-3
        const __m512i hi = _mm512_permutex2var_epi8(z2, pick.idx[j], z3);  // groups 4-7
        _mm512_store_si512(out.q[j], _mm512_mask_blend_epi64(__mmask8(0xF0), lo, hi));
    }
}

float dot_iq2_xxs_q8_k_vbmi(int64_t n, const void* w, const void* act) {
    const int64_t nb = n / kQK_K;
    thread_local std::vector<Iq2xxsActBlock> ordered;
    if (ordered.size() < size_t(nb)) ordered.resize(size_t(nb));
    iq2xxs_order_act(nb, static_cast<const BlockQ8_K*>(act), ordered.data(), VbmiDecoder::kOrder);
    return iq2xxs_dot_ordered(decoder(), nb, static_cast<const BlockIQ2_XXS*>(w), ordered.data());
}

void iq2xxs_rows_vbmi(int64_t nb, const void* W, size_t w_stride, int64_t rows,
                      const Iq2xxsActBlock* act, float* y) {
    iq2xxs_rows_ordered(decoder(), nb, static_cast<const uint8_t*>(W), w_stride, rows, act, y);
}

void iq2xxs_decode_row_vbmi(int64_t nb, const void* row, Iq2xxsDecodedPair* out) {
    iq2xxs_decode_row(decoder(), nb, static_cast<const BlockIQ2_XXS*>(row), out);
}

}  // namespace ds4::quant

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
