// Q4_K weights (spec/ARCHITECTURE.md §2.5): 256 values per 144-byte block, 4-bit codes with a
// 6-bit scale and 6-bit min per 32 values. Dots take Q8_K activations. The kernels below are
// what kQ4_KFormat lists; tests reach them through format_ops().
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace ds4::quant {

// The 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
inline void q4_k_scale_min(const uint8_t* s, int j, int* sc, int* mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

void dequantize_q4_k(const BlockQ4_K* src, float* dst, int64_t n);
// importance: n weights of the squared error, or nullptr for all ones.
void quantize_q4_k(const float* src, BlockQ4_K* dst, int64_t n, const float* importance);

// sum_i w_i * a_i over n values (n a multiple of 256). Integer parts are exact; kernels differ
// only in the order of the per-block float sums. Activation codes must lie in [-127, 127], as
// quantize_q8_k produces them.
float dot_q4_k_q8_k_scalar(int64_t n, const void* w, const void* act);
float dot_q4_k_q8_k_avx2(int64_t n, const void* w, const void* act);
float dot_q4_k_q8_k_avx512(int64_t n, const void* w, const void* act);

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA:
// q4_k_multi_avx2.cpp, q4_k_multi_avx512.cpp.
void multi_q4_k_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y);
void multi_q4_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
