// Q8_0 weights: 32 int8 codes and an f16 scale per block (spec/ARCHITECTURE.md §2.5).
#include "quant/q8_0/q8_0.h"

#include <cmath>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/multi_dot.h"

namespace ds4::quant {
namespace {

void dequantize(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockQ8_0*>(src);
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
        const float d = f16_to_f32(x[b].d);
        for (int j = 0; j < kQK8_0; ++j) dst[b * kQK8_0 + j] = float(x[b].qs[j]) * d;
    }
}

// The reference weight quantizer, as ggml's quantize_row_q8_0_ref (so the generator's files
// are what llama.cpp would write): d = amax/127, q = round-half-away(x / d). The
// importance weights are ignored: for a single scale per block fixed by amax there is no
// choice for them to influence.
void quantize(const float* src, void* dst, int64_t n, const float*) {
    auto* y = static_cast<BlockQ8_0*>(dst);
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
        const float* x = src + b * kQK8_0;
        float amax = 0.0f;
        for (int j = 0; j < kQK8_0; ++j) amax = std::fmax(amax, std::fabs(x[j]));
        const float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        if (!std::isfinite(id)) id = 0.0f;  // amax tiny: d rounds to f16 zero anyway
        y[b].d = f32_to_f16(d);
        for (int j = 0; j < kQK8_0; ++j) y[b].qs[j] = int8_t(std::round(x[j] * id));
    }
}

}  // namespace

float dot_q8_0_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    float lane[kQ8_0Lanes] = {};
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
        int sumi = 0;
        for (int j = 0; j < kQK8_0; ++j) sumi += int(x[b].qs[j]) * int(y[b].qs[j]);
        float& acc = lane[b % kQ8_0Lanes];
        acc = std::fma(float(sumi), f16_to_f32(x[b].d) * f16_to_f32(y[b].d), acc);
    }
    for (int w = kQ8_0Lanes / 2; w >= 1; w /= 2)
        for (int k = 0; k < w; ++k) lane[k] += lane[k + w];
    return lane[0];
}

constinit const FormatOps kQ8_0Format{
    .type = TensorType::Q8_0,
    .dot_type = TensorType::Q8_0,
    .dequantize = dequantize,
    .quantize = quantize,
    .dot = {dot_q8_0_scalar, avx2::dot_q8_0, avx512::dot_q8_0},
    .multi = {multi_scalar<dot_q8_0_scalar>, multi_q8_0_avx2, multi_q8_0_avx512},
    .ggml_compat = compat::dot_q8_0,
    .multi_for_one_activation = true,
    .multi_blocks_rows = true,
};

}  // namespace ds4::quant
