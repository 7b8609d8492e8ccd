// The AVX512-VBMI decoder of IQ2_XXS blocks (iq2_xxs_vbmi.h), in the AVX-512 kernels' step
// order (iq2_xxs_step_avx512.h). Per block of 256 values:
//   magnitudes: each codebook point is stored as 16 bits, 2 per value (0, 1, 2 for 8, 25, 43);
//     the block's 32 indices pick their points with four vpermt2w over the 512-byte table and
//     two blends on index bits 6-7, which leaves group g's four points in qword g; per step k,
//     vpmultishiftqb moves value j of point k's 2 bits to byte j, and vpermb maps them to
//     8 / 25 / 43;
//   signs: vpmultishiftqb puts the 7-bit sign field k of group g in byte 8g + k, vpermi2b
//     maps it to its 8-bit mask (the parity bit added) through the 128-byte table, and per
//     step k one vpshufbitqmb (AVX512-BITALG) picks bits 8k..8k+7 of every qword straight
//     into the step's mask register (no trip through general registers).
// The scales come per pair of blocks (iq2xxs_pair_scales).
// The point codes are derived from the codebook (iq2_xxs_grid.h) at start-up, not stored.
//
// Everything after the target pragma is compiled for AVX512-VBMI and -BITALG and has internal
// linkage except the entry points, which run only when the CPU has both.
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
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & bit_AVX512VBMI) && (c & bit_AVX512BITALG);
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
#pragma clang attribute push(__attribute__((target("avx512vbmi,avx512bitalg"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512vbmi,avx512bitalg")
#endif

#include "quant/iq2_xxs_step_avx512.h"

namespace ds4::quant {
namespace {

struct VbmiDecoder {
    __m512i table[8];      // the 256 point codes, 32 per register
    __m512i index_pick;    // vpermb: word i <- index byte i (byte 8*(i/4) + i%4 of the block)
    __m512i bit_offsets[4]; // vpmultishiftqb for step k: byte j <- bits 16k+2j.. of its qword
    __m512i magnitudes;    // vpermb: [c] = 8, 25, 43 for c & 3 = 0, 1, 2
    __m512i field_offsets; // vpmultishiftqb: byte 8g+k <- bits 32+7k.. of qword g (aux of g)
    __m512i sign_masks[2]; // kIq2xxsSignMasks, 64 entries per register
    __m512i sign_bits[4];  // vpshufbitqmb for step k: bit 8g+j <- bit 8k+j of qword g

    VbmiDecoder() {
        static const PointCodes codes;
        for (int q = 0; q < 8; ++q) table[q] = _mm512_load_si512(codes.code + 32 * q);
        alignas(64) uint8_t c[64];
        for (int i = 0; i < 32; ++i) {
            c[2 * i] = uint8_t(8 * (i / 4) + i % 4);
            c[2 * i + 1] = 0;
        }
        index_pick = _mm512_load_si512(c);
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < 64; ++i) c[i] = uint8_t(16 * k + 2 * (i % 8));
            bit_offsets[k] = _mm512_load_si512(c);
        }
        const uint8_t mag[4] = {8, 25, 43, 0};
        for (int i = 0; i < 64; ++i) c[i] = mag[i & 3];
        magnitudes = _mm512_load_si512(c);
        for (int i = 0; i < 64; ++i) c[i] = uint8_t(i % 8 < 4 ? 32 + 7 * (i % 8) : 0);
        field_offsets = _mm512_load_si512(c);
        sign_masks[0] = _mm512_loadu_si512(kIq2xxsSignMasks.data());
        sign_masks[1] = _mm512_loadu_si512(kIq2xxsSignMasks.data() + 64);
        for (int k = 0; k < 4; ++k) {
            for (int i = 0; i < 64; ++i) c[i] = uint8_t(8 * k + i % 8);
            sign_bits[k] = _mm512_load_si512(c);
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
        // index bits); step k's mask bit 8g + j is then bit 8k + j of qword g.
        const __m512i signs = _mm512_permutex2var_epi8(
            sign_masks[0], _mm512_multishift_epi64_epi8(field_offsets, codes), sign_masks[1]);
        // Qword g of points holds group g's four points: step k's codes are 16 bits further.
        for (int k = 0; k < 4; ++k) {
            st.mag[k] = _mm512_permutexvar_epi8(_mm512_multishift_epi64_epi8(bit_offsets[k], points),
                                                magnitudes);
            st.neg[k] = _mm512_bitshuffle_epi64_mask(signs, sign_bits[k]);
        }
    }
};

const VbmiDecoder& decoder() {
    static const VbmiDecoder d;
    return d;
}

}  // namespace

float dot_iq2_xxs_q8_k_vbmi(int64_t n, const void* w, const void* act) {
    const int64_t nb = n / kQK_K;
    thread_local std::vector<Iq2xxsActBlock> ordered;
    if (ordered.size() < size_t(nb)) ordered.resize(size_t(nb));
    iq2xxs_order_act(nb, static_cast<const BlockQ8_K*>(act), ordered.data());
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
