// Dot kernels of the plain float weight formats (F32, F16, BF16), one per ISA. The activation
// row has the weight's own type (ggml's vec_dot_type for these formats), n values, any n.
//
// The scalar versions are the references: products in float (exact for F16 and BF16 inputs),
// summed in double. The SIMD versions sum in float lanes, so they equal the reference only up
// to float summation order; tests bound the difference relative to sum |w_i * a_i|.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds4::quant {

float dot_f32_scalar(int64_t n, const void* w, const void* act);
float dot_f16_scalar(int64_t n, const void* w, const void* act);
float dot_bf16_scalar(int64_t n, const void* w, const void* act);

namespace avx2 {
float dot_f32(int64_t n, const void* w, const void* act);
float dot_f16(int64_t n, const void* w, const void* act);
float dot_bf16(int64_t n, const void* w, const void* act);
// F32 -> F16 (the activations of F16 weights) with F16C, rounding to nearest even: the same
// bits as f32_to_f16 (common/half.h) for every input but NaN payloads (both stay NaNs).
void f32_to_f16_row(const float* x, uint16_t* y, int64_t n);
}  // namespace avx2

namespace avx512 {
float dot_f32(int64_t n, const void* w, const void* act);
float dot_f16(int64_t n, const void* w, const void* act);
float dot_bf16(int64_t n, const void* w, const void* act);
}  // namespace avx512

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA:
// f16_multi_avx2.cpp, f16_multi_avx512.cpp.
void multi_f16_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                    const void* const* act, int64_t n_act, float* const* y);
void multi_f16_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                      const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
