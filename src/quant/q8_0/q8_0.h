// Q8_0 weights (blocks.h BlockQ8_0) times Q8_0 activations (activation/activation.h quantize_q8_0).
//
// Precondition of every dot kernel: activation codes lie in [-127, 127], as quantize_q8_0
// produces them (the SIMD kernels move the weight's sign onto the activation, so -128 there
// would overflow). Weight codes may be any int8, including -128.
//
// The arithmetic, which every kernel (scalar, AVX2, AVX-512, one row or many) reproduces bit
// for bit: 16 float lanes from 0; block b, in order, does lane[b % 16] = fma(float(exact sum
// of its 32 integer products), d_w * d_a, lane[b % 16]); then lane[k] += lane[k + w] for
// w = 8, 4, 2, 1 and the result is lane[0]. (16 lanes: a 512-bit register of block sums, so
// the SIMD kernels need no horizontal sum per block; see q8_0_multi_avx512.cpp.)
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds4::quant {

inline constexpr int kQ8_0Lanes = 16;

float dot_q8_0_scalar(int64_t n, const void* w, const void* act);

namespace avx2 {
float dot_q8_0(int64_t n, const void* w, const void* act);
}
namespace avx512 {
float dot_q8_0(int64_t n, const void* w, const void* act);
}

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA:
// q8_0_multi_avx2.cpp, q8_0_multi_avx512.cpp.
void multi_q8_0_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y);
void multi_q8_0_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
