// Q5_K weights (blocks.h BlockQ5_K): 256 values per 176-byte block, Q4_K's layout (6-bit scale
// and min per 32 values, packed the same way; low 4 bits of the codes as Q4_K's nibbles) plus a
// fifth bit per code: bit j of qh[l] is the high bit of value 32j + l. Value i of sub-block j:
// d * sc_j * q_i - dmin * mn_j, q_i in 0..31. Dots take Q8_K activations. The kernels below
// are what kQ5_KFormat lists.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace ds4::quant {

// Code of value 32j + l (j: sub-block 0..7, l: 0..31).
inline int q5_k_code(const BlockQ5_K& b, int j, int l) {
    return ((b.qs[32 * (j / 2) + l] >> (4 * (j % 2))) & 15) | (((b.qh[l] >> j) & 1) << 4);
}

void dequantize_q5_k(const BlockQ5_K* src, float* dst, int64_t n);
// Without importance: ggml's quantize_row_q5_K_ref bit for bit. With importance (n weights of
// the squared error): the scale-and-min fit Q4_K uses (kquant_fit.h) with 5-bit codes.
void quantize_q5_k(const float* src, BlockQ5_K* dst, int64_t n, const float* importance);

// sum_i w_i * a_i over n values (n a multiple of 256). Integer parts are exact; kernels differ
// only in the order of the per-block float sums (as Q4_K's). Activation codes in [-127, 127].
float dot_q5_k_q8_k_scalar(int64_t n, const void* w, const void* act);
float dot_q5_k_q8_k_avx2(int64_t n, const void* w, const void* act);
float dot_q5_k_q8_k_avx512(int64_t n, const void* w, const void* act);

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA; the
// one-row dots above are these with one row and one activation.
void multi_q5_k_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y);
void multi_q5_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
