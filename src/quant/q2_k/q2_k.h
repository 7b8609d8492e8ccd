// Q2_K weights (spec/ARCHITECTURE.md §2.5): 256 values per 84-byte block, 2-bit codes with a 4-bit
// scale and 4-bit min per 16 values. Dots take Q8_K activations. The kernels below are what
// kQ2_KFormat lists; tests reach them through format_ops().
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace ds4::quant {

void dequantize_q2_k(const BlockQ2_K* src, float* dst, int64_t n);
// importance: n weights of the squared error, or nullptr for all ones.
void quantize_q2_k(const float* src, BlockQ2_K* dst, int64_t n, const float* importance);

// sum_i w_i * a_i over n values (n a multiple of 256). Integer parts are exact; kernels differ
// only in the order of the per-block float sums. Activation codes must lie in [-127, 127], as
// quantize_q8_k produces them.
float dot_q2_k_q8_k_scalar(int64_t n, const void* w, const void* act);
float dot_q2_k_q8_k_avx2(int64_t n, const void* w, const void* act);
float dot_q2_k_q8_k_avx512(int64_t n, const void* w, const void* act);
// y[r] = dot_q2_k_q8_k_avx512(n, W + r * w_stride, act) for r < rows (the multi-row kernel's
// path for a single activation: one call for all rows).
void q2_k_rows_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows, const void* act, float* y);

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA:
// q2_k_multi_avx2.cpp, q2_k_multi_avx512.cpp.
void multi_q2_k_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y);
void multi_q2_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
