// MXFP4 weights: 32 E2M1 codes sharing one E8M0 exponent per block (OCP MX format, as ggml
// stores it: low nibbles are values 0..15, high nibbles values 16..31).
#include "quant/mxfp4/mxfp4.h"

#include <algorithm>
#include <bit>
#include <cmath>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/multi_dot.h"

namespace ds4::quant {
namespace {

void dequantize(const void* src, float* dst, int64_t n) {
    const auto* x = static_cast<const BlockMXFP4*>(src);
    for (int64_t b = 0; b < n / kQK_MXFP4; ++b) {
        const float d = mxfp4_scale(x[b].e);
        float* y = dst + b * kQK_MXFP4;
        for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
            y[j] = float(kMxfp4Values[x[b].qs[j] & 15]) * d;
            y[j + kQK_MXFP4 / 2] = float(kMxfp4Values[x[b].qs[j] >> 4]) * d;
        }
    }
}

// The code whose value is nearest to x; the lowest index wins a tie (so +0 over -0, and the
// smaller magnitude between two neighbours), the order ggml's reference search uses.
uint8_t nearest_code(float x, float d) {
    uint8_t best = 0;
    float best_err = std::fabs(float(kMxfp4Values[0]) * d - x);
    for (uint8_t i = 1; i < 16; ++i) {
        const float err = std::fabs(float(kMxfp4Values[i]) * d - x);
        if (err < best_err) {
            best = i;
            best_err = err;
        }
    }
    return best;
}

// The reference quantizer, as ggml's quantize_row_mxfp4_ref: the shared exponent is
// floor(log2(amax)) - 2 (the largest E2M1 magnitude is 6 = 1.5 * 2^2), then each value takes
// its nearest code. log2f is the C library's, as in ggml, so the exponent is decided the
// same way even where log2f rounds up just below a power of two. Exponents are clamped to
// the valid E8M0 range [0, 254] (ggml's cast is undefined below 2^-125).
void quantize(const float* src, void* dst, int64_t n, const float*) {
    auto* y = static_cast<BlockMXFP4*>(dst);
    for (int64_t b = 0; b < n / kQK_MXFP4; ++b) {
        const float* x = src + b * kQK_MXFP4;
        float amax = 0.0f;
        for (int j = 0; j < kQK_MXFP4; ++j) amax = std::max(amax, std::fabs(x[j]));
        uint8_t e = 0;
        if (amax > 0.0f) {
            const float exp = std::floor(std::log2(amax)) - 2.0f + 127.0f;
            e = uint8_t(std::clamp(exp, 0.0f, 254.0f));
        }
        const float d = mxfp4_scale(e);
        y[b].e = e;
        for (int j = 0; j < kQK_MXFP4 / 2; ++j)
            y[b].qs[j] = uint8_t(nearest_code(x[j], d) | (nearest_code(x[j + 16], d) << 4));
    }
}

}  // namespace

float mxfp4_scale(uint8_t e) {
    // 2^(e-128): exponent field e-1 for e >= 2; below that the float is subnormal.
    const uint32_t bits = e >= 2 ? uint32_t(e - 1) << 23 : 0x00200000u << e;
    return std::bit_cast<float>(bits);
}

float dot_mxfp4_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockMXFP4*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    float sum = 0.0f;
    for (int64_t b = 0; b < n / kQK_MXFP4; ++b) {
        int sumi = 0;
        for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
            sumi += int(kMxfp4Values[x[b].qs[j] & 15]) * int(y[b].qs[j]);
            sumi += int(kMxfp4Values[x[b].qs[j] >> 4]) * int(y[b].qs[j + 16]);
        }
        sum += float(sumi) * (f16_to_f32(y[b].d) * mxfp4_scale(x[b].e));
    }
    return sum;
}

constinit const FormatOps kMxfp4Format{
    .type = TensorType::MXFP4,
    .dot_type = TensorType::Q8_0,
    .dequantize = dequantize,
    .quantize = quantize,
    .dot = {dot_mxfp4_scalar, avx2::dot_mxfp4, avx512::dot_mxfp4},
    .multi = {multi_scalar<dot_mxfp4_scalar>, multi_mxfp4_avx2, multi_mxfp4_avx512},
    .ggml_compat = compat::dot_mxfp4,
    .multi_for_one_activation = false,
    .multi_blocks_rows = false,
};

}  // namespace ds4::quant
