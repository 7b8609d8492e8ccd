// The IQ2_XXS AVX-512 kernels' AVX512-VBMI path (iq2_xxs_vbmi_avx512.cpp): vector codebook
// lookups over pairs of blocks instead of eight scalar loads per 64 values, used by
// dot_iq2_xxs_q8_k_avx512 and the multi-row kernel when the CPU has VBMI. Same results either
// way (iq2_xxs_step_avx512.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds4::quant {

// Whether the kernels take the VBMI path: the CPU has AVX512-VBMI and GFNI (every CPU with
// VBMI since Ice Lake and Zen 4) and tests have not turned it off.
bool iq2xxs_vbmi_active();
// Tests turn it off to check the lookup path on a VBMI CPU (process-wide).
void iq2xxs_allow_vbmi(bool allow);

struct Iq2xxsDecodedPair;  // iq2_xxs_step_avx512.h

// Everything below only while iq2xxs_vbmi_active(). Activations are Q8_K blocks.
// The dot of one weight row with one activation (n values).
float dot_iq2_xxs_q8_k_vbmi(int64_t n, const void* w, const void* act);
// y[r] = the dot of weight row r (rows of nb blocks, w_stride bytes apart) with one activation:
// the multi-row kernel's path for a single activation (the activation is reordered once).
void iq2xxs_rows_vbmi(int64_t nb, const void* W, size_t w_stride, int64_t rows, const void* act,
                      float* y);
// The few-row path (2 <= n_act <= kIq2xxsFewRowsMax activations: verification steps, routed
// experts chosen by a few rows): each weight row streams once and each pair of blocks is
// decoded once, in registers, for every activation: y[t][r] = the one-row dot, bit for bit.
// In L2, one thread, a call of 2 / 3 / 4 / 5 rows costs 1.37 / 1.73 / 2.22 / 2.66x its
// one-row call, 1.03 / 1.24-1.31 / 1.61-1.68 / 1.95-2.01x the one-row call of the form before
// the one-vpermb step (2026-12-05); past 5 rows it would beat the tiles in L2 (1.09-1.23x at
// 6-8 rows) but not from memory (1.00-1.02x), so 6 rows on keep the tiles.
inline constexpr int kIq2xxsFewRowsMax = 5;
void iq2xxs_few_rows_vbmi(int64_t nb, const void* W, size_t w_stride, int64_t rows, const void* const* act,
                          int n_act, float* const* y);
// For tests: the few-row path's values of one pair of blocks (pair: two blocks), as it feeds
// them to vpdpbusd: u[s][i] = 43 + w, w = value s of point i % 32 of block i / 32.
void iq2xxs_few_values_vbmi(const void* pair, uint8_t (*u)[64]);
// For the multi-row kernel: one weight row of nb blocks decoded into pairs (signed values in
// the order below), and the activation packing in that order (register s of a pair holds value
// s of every point): row t of a tile of m rows, as unsigned a + 128 at
// codes + ((p * 8 + s) * m + t) * 64, the lanes' d at d + (p * m + t) * 16.
void iq2xxs_decode_row_vbmi(int64_t nb, const void* row, Iq2xxsDecodedPair* out);
void iq2xxs_pack_act_vbmi(int64_t nb, const void* act, int m, int t, uint8_t* codes, float* d);

}  // namespace ds4::quant
