#include "quant/q6_k/q6_k.h"

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/ggml_fit.h"
#include "quant/multi_dot.h"

namespace ds4::quant {

void dequantize_q6_k(const BlockQ6_K* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = f16_to_f32(src[b].d);
        for (int i = 0; i < kQK_K; ++i)  // (d * sc) * q, as ggml rounds it
            dst[b * kQK_K + i] = d * float(src[b].scales[i / 16]) * float(q6_k_code(src[b], i) - 32);
    }
}

namespace {

// ggml's fit: per 16 values a symmetric fit (weights x^2, or the importance), the 16 scales
// quantized to int8 against the one of largest magnitude (-128 there), then every code refit
// to its rounded scale. A block whose scales are all ~0 is all zeros.
void quantize_block(const float* x, const float* importance, BlockQ6_K& y) {
    int8_t L[kQK_K];
    float scales[16];
    float max_scale = 0, max_abs_scale = 0;
    for (int g = 0; g < 16; ++g) {
        scales[g] = ggml_fit::fit_symmetric(16, 32, x + 16 * g, L + 16 * g, importance ? importance + 16 * g : nullptr);
        if (std::fabs(scales[g]) > max_abs_scale) max_abs_scale = std::fabs(scales[g]), max_scale = scales[g];
    }
    if (max_abs_scale < 1e-15f) {
        std::memset(&y, 0, sizeof y);
        return;
    }
    const float iscale = -128.f / max_scale;
    y.d = f32_to_f16(1 / iscale);
    for (int g = 0; g < 16; ++g) {
        const int s = ggml_fit::nearest_int(iscale * scales[g]);
        y.scales[g] = int8_t(s < 127 ? s : 127);
    }
    for (int g = 0; g < 16; ++g) {
        const float d = f16_to_f32(y.d) * float(y.scales[g]);
        if (d == 0.0f) continue;  // keeps the fit's codes, as ggml does
        for (int i = 0; i < 16; ++i) {
            const int l = ggml_fit::nearest_int(x[16 * g + i] / d);
            L[16 * g + i] = int8_t((l < -32 ? -32 : l > 31 ? 31 : l) + 32);
        }
    }
    std::memset(y.ql, 0, sizeof y.ql);
    std::memset(y.qh, 0, sizeof y.qh);
    for (int i = 0; i < kQK_K; ++i) {
        const int h = i / 128, s = (i % 128) / 32, l = i % 32, q = L[i];
        y.ql[64 * h + 32 * (s % 2) + l] |= uint8_t((q & 15) << (4 * (s / 2)));
        y.qh[32 * h + l] |= uint8_t((q >> 4) << (2 * s));
    }
}

void dequantize_fn(const void* src, float* dst, int64_t n) {
    dequantize_q6_k(static_cast<const BlockQ6_K*>(src), dst, n);
}
void quantize_fn(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), n, importance);
}

}  // namespace

void quantize_q6_k(const float* src, BlockQ6_K* dst, int64_t n, const float* importance) {
    for (int64_t b = 0; b < n / kQK_K; ++b)
        quantize_block(src + b * kQK_K, importance ? importance + b * kQK_K : nullptr, dst[b]);
}

// Per block: isum = sum_g sc_g * sum_{i in g} (q_i - 32) * a_i (exact); block value d*d8*isum.
float dot_q6_k_q8_k_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    float sum = 0;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        int32_t isum = 0;
        for (int g = 0; g < 16; ++g) {
            int32_t part = 0;
            for (int i = 16 * g; i < 16 * g + 16; ++i) part += (q6_k_code(x[b], i) - 32) * int32_t(a[b].qs[i]);
            isum += int32_t(x[b].scales[g]) * part;
        }
        sum += a[b].d * f16_to_f32(x[b].d) * float(isum);
    }
    return sum;
}

constinit const FormatOps kQ6_KFormat{
    .type = TensorType::Q6_K,
    .dot_type = TensorType::Q8_K,
    .dequantize = dequantize_fn,
    .quantize = quantize_fn,
    .dot = {dot_q6_k_q8_k_scalar, dot_q6_k_q8_k_avx2, dot_q6_k_q8_k_avx512},
    .multi = {multi_scalar<dot_q6_k_q8_k_scalar>, multi_q6_k_avx2, multi_q6_k_avx512},
    .ggml_compat = compat::dot_q6_k,
    .multi_for_one_activation = false,
    .multi_blocks_rows = false,
};

}  // namespace ds4::quant
