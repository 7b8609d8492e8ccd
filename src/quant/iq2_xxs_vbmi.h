// The IQ2_XXS AVX-512 kernels' AVX512-VBMI decoder (iq2_xxs_vbmi_avx512.cpp): vector codebook
// lookups instead of eight scalar loads per 64 values, used by dot_iq2_xxs_q8_k_avx512 and the
// multi-row kernel when the CPU has VBMI. Same results either way (iq2_xxs_step_avx512.h).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds4::quant {

// Whether the kernels take the VBMI path: the CPU has AVX512-VBMI, AVX512-BITALG and GFNI
// (every CPU with VBMI since Ice Lake and Zen 4) and tests have not turned it off.
bool iq2xxs_vbmi_active();
// Tests turn it off to check the lookup path on a VBMI CPU (process-wide).
void iq2xxs_allow_vbmi(bool allow);

struct Iq2xxsDecodedPair;  // iq2_xxs_step_avx512.h
enum class Iq2xxsStepOrder;  // iq2_xxs_step_avx512.h
struct Iq2xxsActBlock;      // iq2_xxs_step_avx512.h

// The step order of the VBMI decoder (what iq2xxs_order_act must produce for it), and one
// Q8_K block put in that order (two vpermt2b per step; only while iq2xxs_vbmi_active()).
Iq2xxsStepOrder iq2xxs_vbmi_order();
struct BlockQ8_K;
void iq2xxs_order_values_vbmi(const BlockQ8_K& a, Iq2xxsActBlock& out);
// Only while iq2xxs_vbmi_active(): the dot, and the decoding of one weight row of nb blocks
// for the multi-row kernel (iq2_xxs_step_avx512.h iq2xxs_decode_row).
float dot_iq2_xxs_q8_k_vbmi(int64_t n, const void* w, const void* act);
void iq2xxs_decode_row_vbmi(int64_t nb, const void* row, Iq2xxsDecodedPair* out);
// y[r] = the dot of weight row r (rows of nb blocks, w_stride bytes apart) with one activation
// already in step order: the multi-row kernel's path for a single activation.
void iq2xxs_rows_vbmi(int64_t nb, const void* W, size_t w_stride, int64_t rows,
                      const Iq2xxsActBlock* act, float* y);

}  // namespace ds4::quant
