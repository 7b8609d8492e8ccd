#include "quant/q5_k/q5_k.h"

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/ggml_fit.h"
#include "quant/kquant_fit.h"
#include "quant/multi_dot.h"
#include "quant/q4_k/q4_k.h"

namespace ds4::quant {

void dequantize_q5_k(const BlockQ5_K* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const BlockQ5_K& x = src[b];
        const float d = f16_to_f32(x.d), dmin = f16_to_f32(x.dmin);
        for (int j = 0; j < 8; ++j) {
            int sc, mn;
            q4_k_scale_min(x.scales, j, &sc, &mn);
            const float dl = d * float(sc), ml = dmin * float(mn);
            for (int l = 0; l < 32; ++l) dst[b * kQK_K + 32 * j + l] = dl * float(q5_k_code(x, j, l)) - ml;
        }
    }
}

namespace {

// Scales, mins (6 bits each) and codes (value order) into a block; the scale packing is
// Q4_K's (the inverse of q4_k_scale_min).
void pack(const uint8_t* ls, const uint8_t* lm, const uint8_t* L, BlockQ5_K& y) {
    for (int j = 0; j < 4; ++j) {
        y.scales[j] = uint8_t(ls[j] | (ls[j + 4] >> 4) << 6);
        y.scales[j + 4] = uint8_t(lm[j] | (lm[j + 4] >> 4) << 6);
        y.scales[j + 8] = uint8_t((ls[j + 4] & 15) | (lm[j + 4] & 15) << 4);
    }
    std::memset(y.qh, 0, sizeof y.qh);
    for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l) {
            const int q = L[32 * j + l];
            if (j % 2 == 0) y.qs[32 * (j / 2) + l] = uint8_t(q & 15);
            else y.qs[32 * (j / 2) + l] |= uint8_t((q & 15) << 4);
            y.qh[l] |= uint8_t((q >> 4) << j);
        }
}

// ggml's reference: per sub-block a fit with min (weights sqrt(mean x^2) + |x|), the scales and
// mins quantized to 6 bits against their maxima, then every code refit to the rounded scales.
void quantize_ref_block(const float* x, BlockQ5_K& y) {
    uint8_t L[kQK_K], ls[8], lm[8];
    float scales[8], mins[8], weights[32];
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < 8; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        const float av_x = std::sqrt(sum_x2 / 32);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
        scales[j] = ggml_fit::fit_with_min(32, 31, x + 32 * j, weights, L + 32 * j, &mins[j], -0.5f, 0.1f, 15);
        if (scales[j] > max_scale) max_scale = scales[j];
        if (mins[j] > max_min) max_min = mins[j];
    }
    const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
    const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
    for (int j = 0; j < 8; ++j) {
        ls[j] = uint8_t(ggml_fit::nearest_int(inv_scale * scales[j]));  // wraps as ggml's uint8_t
        lm[j] = uint8_t(ggml_fit::nearest_int(inv_min * mins[j]));
        if (ls[j] > 63) ls[j] = 63;
        if (lm[j] > 63) lm[j] = 63;
    }
    y.d = f32_to_f16(max_scale / 63.f);
    y.dmin = f32_to_f16(max_min / 63.f);
    for (int j = 0; j < 8; ++j) {
        const float d = f16_to_f32(y.d) * float(ls[j]);
        if (d == 0.0f) continue;  // keeps the fit's codes, as ggml does
        const float dm = f16_to_f32(y.dmin) * float(lm[j]);
        for (int l = 0; l < 32; ++l) {
            const int q = ggml_fit::nearest_int((x[32 * j + l] + dm) / d);
            L[32 * j + l] = uint8_t(q < 0 ? 0 : q > 31 ? 31 : q);
        }
    }
    pack(ls, lm, L, y);
}

void dequantize_fn(const void* src, float* dst, int64_t n) {
    dequantize_q5_k(static_cast<const BlockQ5_K*>(src), dst, n);
}
void quantize_fn(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), n, importance);
}

}  // namespace

void quantize_q5_k(const float* src, BlockQ5_K* dst, int64_t n, const float* importance) {
    static constexpr KQuantShape kShape{32, 31, 63};
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        if (!importance) {
            quantize_ref_block(src + b * kQK_K, dst[b]);
            continue;
        }
        const KQuantBlock f = fit_kquant_superblock(src + b * kQK_K, importance + b * kQK_K, kShape);
        dst[b].d = f.d;
        dst[b].dmin = f.dmin;
        pack(f.sc, f.mn, f.q, dst[b]);
    }
}

// Per block: isum = sum_j sc_j * (codes_j . q8_j), msum = sum_j mn_j * (sum of the 32
// activations of sub-block j, from bsums); block value d*d8*isum - dmin*d8*msum.
float dot_q5_k_q8_k_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ5_K*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    float sum = 0;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
            int sc, mn;
            q4_k_scale_min(x[b].scales, j, &sc, &mn);
            int32_t part = 0;
            for (int l = 0; l < 32; ++l) part += q5_k_code(x[b], j, l) * int32_t(a[b].qs[32 * j + l]);
            isum += sc * part;
            msum += mn * (int32_t(a[b].bsums[2 * j]) + a[b].bsums[2 * j + 1]);
        }
        const float d = a[b].d * f16_to_f32(x[b].d), dmin = a[b].d * f16_to_f32(x[b].dmin);
        sum += d * float(isum) - dmin * float(msum);
    }
    return sum;
}

constinit const FormatOps kQ5_KFormat{
    .type = TensorType::Q5_K,
    .dot_type = TensorType::Q8_K,
    .dequantize = dequantize_fn,
    .quantize = quantize_fn,
    .dot = {dot_q5_k_q8_k_scalar, dot_q5_k_q8_k_avx2, dot_q5_k_q8_k_avx512},
    .multi = {multi_scalar<dot_q5_k_q8_k_scalar>, multi_q5_k_avx2, multi_q5_k_avx512},
    .ggml_compat = compat::dot_q5_k,
    .multi_for_one_activation = false,
    .multi_blocks_rows = false,
};

}  // namespace ds4::quant
