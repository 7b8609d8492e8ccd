// F32, F16 and BF16 weights: conversions and the scalar reference dots. The narrowings round
// to nearest even (common/half.h), as ggml's quantize_chunk and its CPU from_float do.
#include <cstring>

#include "common/half.h"
#include "quant/float_formats.h"
#include "quant/formats.h"

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

const FormatOps& f32_ops() {
    static const FormatOps ops{TensorType::F32, TensorType::F32, f32_dequantize, f32_quantize,
                               {dot_f32_scalar, avx2::dot_f32, avx512::dot_f32}};
    return ops;
}

const FormatOps& f16_ops() {
    static const FormatOps ops{TensorType::F16, TensorType::F16, f16_dequantize, f16_quantize,
                               {dot_f16_scalar, avx2::dot_f16, avx512::dot_f16}};
    return ops;
}

const FormatOps& bf16_ops() {
    static const FormatOps ops{TensorType::BF16, TensorType::BF16, bf16_dequantize,
                               bf16_quantize, {dot_bf16_scalar, avx2::dot_bf16, avx512::dot_bf16}};
    return ops;
}

}  // namespace ds4::quant
