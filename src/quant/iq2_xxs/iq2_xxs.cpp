#include "quant/iq2_xxs/iq2_xxs.h"

#include <cstring>

#include "common/half.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/iq2_xxs/iq2_xxs_grid.h"
#include "quant/multi_dot.h"

namespace ds4::quant {

void dequantize_iq2_xxs(const BlockIQ2_XXS* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float d = f16_to_f32(src[b].d);
        float* y = dst + b * kQK_K;
        for (int g = 0; g < 8; ++g) {
            uint32_t idx, aux;
            std::memcpy(&idx, src[b].qs + 4 * g, 4);
            std::memcpy(&aux, src[b].qs + 4 * g + 2, 4);
            const float db = d * (0.5f + float(aux >> 28)) * 0.25f;
            for (int k = 0; k < 4; ++k) {
                const uint64_t grid = kIq2xxsGrid[(idx >> (8 * k)) & 255];
                const uint8_t signs = kIq2xxsSignMasks[(aux >> (7 * k)) & 127];
                for (int j = 0; j < 8; ++j) {
                    const float m = float((grid >> (8 * j)) & 255);
                    y[32 * g + 8 * k + j] = db * m * (1.f - 2.f * float((signs >> j) & 1));
                }
            }
        }
    }
}

// Per block: sum over groups of (2l+1) * (signed magnitudes . q8), exact in i32; the
// block's d*d8 multiplies it and the common 1/8 is applied once at the end.
float dot_iq2_xxs_q8_k_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockIQ2_XXS*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    float sum = 0;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        int32_t isum = 0;
        for (int g = 0; g < 8; ++g) {
            uint32_t idx, aux;
            std::memcpy(&idx, x[b].qs + 4 * g, 4);
            std::memcpy(&aux, x[b].qs + 4 * g + 2, 4);
            int32_t part = 0;
            for (int k = 0; k < 4; ++k) {
                const uint64_t grid = kIq2xxsGrid[(idx >> (8 * k)) & 255];
                const uint8_t signs = kIq2xxsSignMasks[(aux >> (7 * k)) & 127];
                for (int j = 0; j < 8; ++j) {
                    const int32_t m = int32_t((grid >> (8 * j)) & 255);
                    const int32_t q = a[b].qs[32 * g + 8 * k + j];
                    part += (1 - 2 * int32_t((signs >> j) & 1)) * m * q;
                }
            }
            isum += part * int32_t(2 * (aux >> 28) + 1);
        }
        sum += a[b].d * f16_to_f32(x[b].d) * float(isum);
    }
    return 0.125f * sum;
}

namespace {
void dequantize_fn(const void* src, float* dst, int64_t n) {
    dequantize_iq2_xxs(static_cast<const BlockIQ2_XXS*>(src), dst, n);
}
void quantize_fn(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_iq2_xxs(src, static_cast<BlockIQ2_XXS*>(dst), n, importance);
}
}  // namespace

constinit const FormatOps kIq2XxsFormat{
    .type = TensorType::IQ2_XXS,
    .dot_type = TensorType::Q8_K,
    .dequantize = dequantize_fn,
    .quantize = quantize_fn,
    .dot = {dot_iq2_xxs_q8_k_scalar, dot_iq2_xxs_q8_k_avx2, dot_iq2_xxs_q8_k_avx512},
    .multi = {multi_scalar<dot_iq2_xxs_q8_k_scalar>, multi_iq2_xxs_avx2, multi_iq2_xxs_avx512},
    .ggml_compat = compat::dot_iq2_xxs,
    .multi_for_one_activation = true,
    .multi_blocks_rows = true,
};

}  // namespace ds4::quant
