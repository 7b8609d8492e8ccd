// F32, F16 and BF16 weights: conversions and the scalar reference dots. The narrowings round
// to nearest even (common/half.h), as ggml's quantize_chunk and its CPU from_float do.
#include <cstring>

#include "common/half.h"
#include "quant/float/float_formats.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/multi_dot.h"

namespace ds4::quant {
namespace {

void f32_dequantize(const void* src, float* dst, int64_t n) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
}
void f32_quantize(const float* src, void* dst, int64_t n, const float*) {
    std::memcpy(dst, src, size_t(n) * sizeof(float));
}

void f16_dequantize(const void* src, float* dst, int64_t n) {
    const auto* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = f16_to_f32(h[i]);
}
void f16_quantize(const float* src, void* dst, int64_t n, const float*) {
    auto* h = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(src[i]);
}

void bf16_dequantize(const void* src, float* dst, int64_t n) {
    const auto* h = static_cast<const uint16_t*>(src);
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
}
void bf16_quantize(const float* src, void* dst, int64_t n, const float*) {
    auto* h = static_cast<uint16_t*>(dst);
    for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
}

}  // namespace

float dot_f32_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const float*>(w);
    const auto* y = static_cast<const float*>(act);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += double(x[i]) * double(y[i]);
    return float(sum);
}

float dot_f16_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(act);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += f16_to_f32(x[i]) * f16_to_f32(y[i]);  // exact product
    return float(sum);
}

float dot_bf16_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(act);
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) sum += bf16_to_f32(x[i]) * bf16_to_f32(y[i]);  // exact
    return float(sum);
}

constinit const FormatOps kF32Format{
    .type = TensorType::F32,
    .dot_type = TensorType::F32,
    .dequantize = f32_dequantize,
    .quantize = f32_quantize,
    .dot = {dot_f32_scalar, avx2::dot_f32, avx512::dot_f32},
    .multi = {},
    .ggml_compat = compat::dot_f32,
    .multi_for_one_activation = false,
    .multi_blocks_rows = false,
};

constinit const FormatOps kF16Format{
    .type = TensorType::F16,
    .dot_type = TensorType::F16,
    .dequantize = f16_dequantize,
    .quantize = f16_quantize,
    .dot = {dot_f16_scalar, avx2::dot_f16, avx512::dot_f16},
    .multi = {multi_scalar<dot_f16_scalar>, multi_f16_avx2, multi_f16_avx512},
    .ggml_compat = compat::dot_f16,
    .multi_for_one_activation = false,
    .multi_blocks_rows = false,
};

constinit const FormatOps kBf16Format{
    .type = TensorType::BF16,
    .dot_type = TensorType::BF16,
    .dequantize = bf16_dequantize,
    .quantize = bf16_quantize,
    .dot = {dot_bf16_scalar, avx2::dot_bf16, avx512::dot_bf16},
    .multi = {},
    .ggml_compat = compat::dot_bf16,
    .multi_for_one_activation = false,
    .multi_blocks_rows = false,
};

}  // namespace ds4::quant
