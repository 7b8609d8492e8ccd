// Q4_0 weights (blocks.h BlockQ4_0: 32 values per 18 bytes, value j = d * (q_j - 8)) times
// Q8_0 activations, as ggml pairs them. The kernels below are what kQ4_0Format lists.
//
// Precondition of every dot kernel: activation codes lie in [-127, 127], as quantize_q8_0
// produces them.
//
// The arithmetic, which every kernel (scalar, AVX2, AVX-512, one row or many) reproduces bit
// for bit: 16 float lanes from 0; block b, in order, with d_b = f16(w.d) * f16(a.d) (one
// rounding), does for k = 0..7
//     lane[8 * (b % 2) + k] = fma(float(exact sum over values 4k..4k+3 of (q - 8) * a), d_b, lane)
// then h_k = lane[k] + lane[k + 8], r_i = h_i + h_{i+4} and the result is
// (r_0 + r_2) + (r_1 + r_3). (Eight lanes of four products per block is ggml's own AVX2 layout,
// so one block is one vector; the even/odd split lets AVX-512 take two blocks per register.)
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace ds4::quant {

void dequantize_q4_0(const BlockQ4_0* src, float* dst, int64_t n);
// Without importance: ggml's quantize_row_q4_0_ref bit for bit (d = max / -8 from the value of
// largest magnitude, q = min(15, trunc(x / d + 8.5))). With importance (n weights): ggml's
// imatrix quantizer (quantize_row_q4_0_impl) for a row of n values: a weighted
// least-squares scale per block, weights importance * sqrt(sigma^2 + x^2).
void quantize_q4_0(const float* src, BlockQ4_0* dst, int64_t n, const float* importance);

float dot_q4_0_q8_0_scalar(int64_t n, const void* w, const void* act);
float dot_q4_0_q8_0_avx2(int64_t n, const void* w, const void* act);
float dot_q4_0_q8_0_avx512(int64_t n, const void* w, const void* act);

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA; the
// one-row dots above are these with one row and one activation.
void multi_q4_0_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y);
void multi_q4_0_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
