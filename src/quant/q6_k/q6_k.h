// Q6_K weights (blocks.h BlockQ6_K): 256 values per 210-byte block, value i = d * sc[i / 16] *
// (q_i - 32), q_i 6 bits, sc signed 8 bits. The codes of half h (values 128h .. 128h+127) are
// in ql[64h .. 64h+63] and qh[32h .. 32h+31]: for l < 32 and s = 0..3, value 128h + 32s + l
// has low 4 bits from ql[64h + 32(s % 2) + l] (low nibble for s < 2, high nibble otherwise)
// and high 2 bits from bits 2s, 2s+1 of qh[32h + l]. Dots take Q8_K activations. The kernels
// below are what kQ6_KFormat lists.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace ds4::quant {

// The 6-bit code (0..63) of value i (0..255).
inline int q6_k_code(const BlockQ6_K& b, int i) {
    const int h = i / 128, s = (i % 128) / 32, l = i % 32;
    const int lo = (b.ql[64 * h + 32 * (s % 2) + l] >> (4 * (s / 2))) & 15;
    return lo | (((b.qh[32 * h + l] >> (2 * s)) & 3) << 4);
}

void dequantize_q6_k(const BlockQ6_K* src, float* dst, int64_t n);
// Without importance: ggml's quantize_row_q6_K_ref bit for bit. With importance (n weights):
// ggml's imatrix quantizer (quantize_row_q6_K_impl), the same fit weighted by importance.
void quantize_q6_k(const float* src, BlockQ6_K* dst, int64_t n, const float* importance);

// sum_i w_i * a_i over n values (n a multiple of 256). Integer parts are exact; kernels differ
// only in the order of the per-block float sums. Activation codes in [-127, 127].
float dot_q6_k_q8_k_scalar(int64_t n, const void* w, const void* act);
float dot_q6_k_q8_k_avx2(int64_t n, const void* w, const void* act);
float dot_q6_k_q8_k_avx512(int64_t n, const void* w, const void* act);

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA; the
// one-row dots above are these with one row and one activation.
void multi_q6_k_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y);
void multi_q6_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
