#include "quant/q4_0/q4_0.h"

#include <cmath>

#include "common/half.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/ggml_fit.h"
#include "quant/multi_dot.h"

namespace ds4::quant {

void dequantize_q4_0(const BlockQ4_0* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK4_0; ++b) {
        const float d = f16_to_f32(src[b].d);
        float* y = dst + b * kQK4_0;
        for (int j = 0; j < kQK4_0 / 2; ++j) {
            y[j] = float((src[b].qs[j] & 15) - 8) * d;
            y[j + 16] = float((src[b].qs[j] >> 4) - 8) * d;
        }
    }
}

namespace {

// ggml's (int8_t)(v + 8.5f) then MIN(15, ...): truncation toward zero. v lies in [-8, 8] for
// finite input; the clamp keeps NaN and infinities (undefined there in C) inside the code range.
uint8_t q4_0_code(float v) {
    const float t = v + 8.5f;
    if (!(t >= 0.0f)) return 0;
    return t >= 15.0f ? 15 : uint8_t(int(t));
}

void quantize_ref(const float* src, BlockQ4_0* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK4_0; ++b) {
        const float* x = src + b * kQK4_0;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kQK4_0; ++j)
            if (amax < std::fabs(x[j])) amax = std::fabs(x[j]), max = x[j];
        const float d = max / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        dst[b].d = f32_to_f16(d);
        for (int j = 0; j < kQK4_0 / 2; ++j)
            dst[b].qs[j] = uint8_t(q4_0_code(x[j] * id) | q4_0_code(x[j + 16] * id) << 4);
    }
}

void quantize_weighted(const float* src, BlockQ4_0* dst, int64_t n, const float* importance) {
    float sum_x2 = 0;
    for (int64_t j = 0; j < n; ++j) sum_x2 += src[j] * src[j];
    const float sigma2 = sum_x2 / float(n);
    float weight[kQK4_0];
    int8_t L[kQK4_0];
    for (int64_t b = 0; b < n / kQK4_0; ++b) {
        const float* x = src + b * kQK4_0;
        const float* qw = importance + b * kQK4_0;
        for (int j = 0; j < kQK4_0; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
        dst[b].d = f32_to_f16(ggml_fit::fit_symmetric(kQK4_0, 8, x, L, weight));
        for (int j = 0; j < 16; ++j) dst[b].qs[j] = uint8_t(L[j] | L[j + 16] << 4);
    }
}

void dequantize_fn(const void* src, float* dst, int64_t n) {
    dequantize_q4_0(static_cast<const BlockQ4_0*>(src), dst, n);
}
void quantize_fn(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_q4_0(src, static_cast<BlockQ4_0*>(dst), n, importance);
}

}  // namespace

void quantize_q4_0(const float* src, BlockQ4_0* dst, int64_t n, const float* importance) {
    if (importance) quantize_weighted(src, dst, n, importance);
    else quantize_ref(src, dst, n);
}

float dot_q4_0_q8_0_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    const auto* a = static_cast<const BlockQ8_0*>(act);
    float lane[16] = {};
    for (int64_t b = 0; b < n / kQK4_0; ++b) {
        const float d = f16_to_f32(x[b].d) * f16_to_f32(a[b].d);
        for (int k = 0; k < 8; ++k) {
            int s = 0;
            for (int i = 4 * k; i < 4 * k + 4; ++i) {
                const int q = i < 16 ? x[b].qs[i] & 15 : x[b].qs[i - 16] >> 4;
                s += (q - 8) * int(a[b].qs[i]);
            }
            float& l = lane[8 * (b % 2) + k];
            l = std::fma(float(s), d, l);
        }
    }
    float r[4];
    for (int i = 0; i < 4; ++i) r[i] = (lane[i] + lane[i + 8]) + (lane[i + 4] + lane[i + 12]);
    return (r[0] + r[2]) + (r[1] + r[3]);
}

constinit const FormatOps kQ4_0Format{
    .type = TensorType::Q4_0,
    .dot_type = TensorType::Q8_0,
    .dequantize = dequantize_fn,
    .quantize = quantize_fn,
    .dot = {dot_q4_0_q8_0_scalar, dot_q4_0_q8_0_avx2, dot_q4_0_q8_0_avx512},
    .multi = {multi_scalar<dot_q4_0_q8_0_scalar>, multi_q4_0_avx2, multi_q4_0_avx512},
    .ggml_compat = compat::dot_q4_0,
    .multi_for_one_activation = false,
    .multi_blocks_rows = false,
};

}  // namespace ds4::quant
