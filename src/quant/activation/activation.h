// Activation quantizers: the Q8_0 and Q8_K blocks (blocks.h) the quantized formats' dot
// kernels take (quant.h dot_type). quant.h quantize_activation() picks the fastest one the CPU
// runs; conventions and the oracle's rules they follow: q8_k.cpp.
#pragma once

#include <cstdint>

#include "quant/blocks.h"

namespace ds4::quant {

// The references (q8_k.cpp).
void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_q8_k(const float* src, BlockQ8_K* dst, int64_t n);
void dequantize_q8_k(const BlockQ8_K* src, float* dst, int64_t n);

namespace avx512 {
// The same blocks as the two above, bit for bit, for every input (q8_k_avx512.cpp).
void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_q8_k(const float* src, BlockQ8_K* dst, int64_t n);
}  // namespace avx512

}  // namespace ds4::quant
