// Registry of the per-format tables; each lives in the format's own file (q8_0.cpp, ...).
// quant.cpp dispatches through these.
#pragma once

#include "quant/blocks.h"
#include "quant/quant.h"

namespace ds4::quant {

const FormatOps& f32_ops();
const FormatOps& f16_ops();
const FormatOps& bf16_ops();
const FormatOps& q8_0_ops();
const FormatOps& q2_k_ops();
const FormatOps& q4_k_ops();
const FormatOps& iq2_xxs_ops();
const FormatOps& mxfp4_ops();

// Activation quantizers (the dot types of the quantized formats).
void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_q8_k(const float* src, BlockQ8_K* dst, int64_t n);
void dequantize_q8_k(const BlockQ8_K* src, float* dst, int64_t n);

namespace avx512 {
// The same blocks as the two above, bit for bit, for every input (q8_k_avx512.cpp).
void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void quantize_q8_k(const float* src, BlockQ8_K* dst, int64_t n);
}  // namespace avx512

}  // namespace ds4::quant
