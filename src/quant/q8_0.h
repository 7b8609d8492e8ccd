// Q8_0 weights (blocks.h BlockQ8_0) times Q8_0 activations (formats.h quantize_q8_0).
//
// Precondition of every dot kernel: activation codes lie in [-127, 127], as quantize_q8_0
// produces them (the SIMD kernels move the weight's sign onto the activation, so -128 there
// would overflow). Weight codes may be any int8, including -128.
//
// Each block contributes float(sum of 32 integer products) * (d_w * d_a); the integer sums
// are exact, so the SIMD kernels differ from the scalar reference only in float summation
// order.
#pragma once

#include <cstdint>

namespace ds4::quant {

float dot_q8_0_scalar(int64_t n, const void* w, const void* act);

namespace avx2 {
float dot_q8_0(int64_t n, const void* w, const void* act);
}
namespace avx512 {
float dot_q8_0(int64_t n, const void* w, const void* act);
}

}  // namespace ds4::quant
