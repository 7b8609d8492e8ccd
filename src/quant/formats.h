// The registry of weight formats: one FormatOps record (quant.h) per format, each defined
// with the format's kernels (q8_0.cpp, ...) and listed once in quant.cpp's kFormats, through
// which format_ops(), dot_kernel(), multi_dot_kernel() and the ggml compatibility mode find
// everything about a format.
#pragma once

#include "quant/blocks.h"
#include "quant/quant.h"

namespace ds4::quant {

extern const FormatOps kF32Format;
extern const FormatOps kF16Format;
extern const FormatOps kBf16Format;
extern const FormatOps kQ8_0Format;
extern const FormatOps kQ2_KFormat;
extern const FormatOps kQ4_KFormat;
extern const FormatOps kIq2XxsFormat;
extern const FormatOps kMxfp4Format;

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
