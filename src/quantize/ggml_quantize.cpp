// ggml's quantizers as facts: the same float operations in the same order (ggml_fit.h), the
// same integer conversions (a code stored through uint8_t wraps as ggml's does), so the same
// input gives the same bytes. The reasons for ggml's choices are ggml's; we keep them.
#include "quantize/ggml_quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "quant/blocks.h"
#include "quant/ggml_fit.h"
#include "quant/quant.h"

namespace ds4::quantize {

void iq2_xxs_row_ggml(const float* x, void* dst, int64_t n, const float* qw);  // ggml_iq2_xxs.cpp

namespace {

using namespace ds4::quant;
using ggml_fit::nearest_int;

// The f16 fields go through f16 and back before the codes are refit, as ggml's do.
inline float f16_round(uint16_t h) { return f16_to_f32(h); }

// Q4_K / Q5_K 6-bit scale and min packing (8 sub-blocks of 32).
void pack_scales_k4(uint8_t* s, const uint8_t* ls, const uint8_t* lm) {
    for (int j = 0; j < 8; ++j) {
        if (j < 4) {
            s[j] = ls[j];
            s[j + 4] = lm[j];
        } else {
            s[j + 4] = uint8_t((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
            s[j - 4] |= uint8_t((ls[j] >> 4) << 6);
            s[j] |= uint8_t((lm[j] >> 4) << 6);
        }
    }
}
void scale_min_k4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
    if (j < 4) {
        d = q[j] & 63, m = q[j + 4] & 63;
    } else {
        d = uint8_t((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        m = uint8_t((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

// Fits of the 8 sub-blocks of a Q4_K/Q5_K super-block (codes 0..nmax) and the packed 6-bit
// scales; d and dmin f16 bits out. qw: the block's 256 importance weights or nullptr.
void fit_k4_scales(const float* x, int nmax, const float* qw, uint8_t* L, uint8_t* packed,
                   uint16_t& d_out, uint16_t& dmin_out) {
    float scales[8], mins[8], weights[32], sw[8];
    uint8_t ls[8], lm[8];
    if (!qw) {  // quantize_row_q{4,5}_K_ref
        float max_scale = 0, max_min = 0;
        for (int j = 0; j < 8; ++j) {
            float sum_x2 = 0;
            for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
            const float av_x = std::sqrt(sum_x2 / 32);
            for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
            const float rmin = nmax == 15 ? -1.f : -0.5f;
            const int nstep = nmax == 15 ? 20 : 15;
            scales[j] = ggml_fit::fit_with_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], rmin, 0.1f, nstep);
            max_scale = std::max(max_scale, scales[j]);
            max_min = std::max(max_min, mins[j]);
        }
        const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
        const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
        for (int j = 0; j < 8; ++j) {
            ls[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_scale * scales[j])));
            lm[j] = std::min<uint8_t>(63, uint8_t(nearest_int(inv_min * mins[j])));
        }
        d_out = f32_to_f16(max_scale / 63.f);
        dmin_out = f32_to_f16(max_min / 63.f);
    } else {  // quantize_row_q{4,5}_K_impl
        float sum_x2 = 0;
        for (int l = 0; l < kQK_K; ++l) sum_x2 += x[l] * x[l];
        const float sigma2 = 2 * sum_x2 / kQK_K;
        for (int j = 0; j < 8; ++j) {
            for (int l = 0; l < 32; ++l) weights[l] = qw[32 * j + l] * std::sqrt(sigma2 + x[32 * j + l] * x[32 * j + l]);
            float sumw = 0;
            for (int l = 0; l < 32; ++l) sumw += weights[l];
            sw[j] = sumw;
            scales[j] = ggml_fit::fit_with_min(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], -0.9f, 0.05f, 36);
        }
        const float d_block = ggml_fit::fit_positive(8, 63, scales, ls, sw);
        const float m_block = ggml_fit::fit_positive(8, 63, mins, lm, sw);
        if (nmax == 31)  // Q5_K's impl clamps the codes (a wrapped negative one); Q4_K's does not
            for (int j = 0; j < 8; ++j) ls[j] = std::min<uint8_t>(63, ls[j]), lm[j] = std::min<uint8_t>(63, lm[j]);
        d_out = f32_to_f16(d_block);
        dmin_out = f32_to_f16(m_block);
    }
    std::memset(packed, 0, 12);
    pack_scales_k4(packed, ls, lm);
    // Every code refit to the rounded scales.
    for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        scale_min_k4(j, packed, sc, m);
        const float d = f16_round(d_out) * float(sc);
        if (d == 0) continue;
        const float dm = f16_round(dmin_out) * float(m);
        for (int i = 0; i < 32; ++i)
            L[32 * j + i] = uint8_t(std::clamp(nearest_int((x[32 * j + i] + dm) / d), 0, nmax));
    }
}

void q4_k_row(const float* x, BlockQ4_K* y, int64_t n, const float* qw) {
    uint8_t L[kQK_K];
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        fit_k4_scales(x, 15, qw ? qw + kQK_K * b : nullptr, L, y[b].scales, y[b].d, y[b].dmin);
        uint8_t* q = y[b].qs;
        for (int j = 0; j < kQK_K; j += 64, q += 32)
            for (int l = 0; l < 32; ++l) q[l] = uint8_t(L[j + l] | (L[j + l + 32] << 4));
    }
}

// With importance only: without it ggml's reference is the engine's quantize_q5_k.
void q5_k_row(const float* x, BlockQ5_K* y, int64_t n, const float* qw) {
    uint8_t L[kQK_K];
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        fit_k4_scales(x, 31, qw + kQK_K * b, L, y[b].scales, y[b].d, y[b].dmin);
        uint8_t* qh = y[b].qh;
        uint8_t* ql = y[b].qs;
        std::memset(qh, 0, kQK_K / 8);
        uint8_t m1 = 1, m2 = 2;
        for (int k = 0; k < kQK_K; k += 64, ql += 32) {
            for (int j = 0; j < 32; ++j) {
                int l1 = L[k + j], l2 = L[k + j + 32];
                if (l1 > 15) l1 -= 16, qh[j] |= m1;
                if (l2 > 15) l2 -= 16, qh[j] |= m2;
                ql[j] = uint8_t(l1 | (l2 << 4));
            }
            m1 = uint8_t(m1 << 2), m2 = uint8_t(m2 << 2);
        }
    }
}

// Q2_K: 16 sub-blocks of 16, 4-bit scale and min each.
void q2_k_row(const float* x, BlockQ2_K* y, int64_t n, const float* qw_row) {
    uint8_t L[kQK_K];
    float scales[16], mins[16], weights[16], sw[16];
    for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
        BlockQ2_K& out = y[b];
        if (!qw_row) {  // quantize_row_q2_K_ref: absolute error, weights |x|
            float max_scale = 0, max_min = 0;
            for (int j = 0; j < 16; ++j) {
                for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
                scales[j] = ggml_fit::fit_with_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.5f, 0.1f, 15, true);
                max_scale = std::max(max_scale, scales[j]);
                max_min = std::max(max_min, mins[j]);
            }
            for (int j = 0; j < 16; ++j)
                out.scales[j] = max_scale > 0 ? uint8_t(nearest_int(15.f / max_scale * scales[j])) : 0;
            out.d = f32_to_f16(max_scale > 0 ? max_scale / 15.f : 0.f);
            if (max_min > 0)
                for (int j = 0; j < 16; ++j) out.scales[j] |= uint8_t(nearest_int(15.f / max_min * mins[j]) << 4);
            out.dmin = f32_to_f16(max_min > 0 ? max_min / 15.f : 0.f);
        } else {  // quantize_row_q2_K_impl: sigma^2 over the super-block
            const float* qwb = qw_row + kQK_K * b;
            float sumx2 = 0;
            for (int j = 0; j < kQK_K; ++j) sumx2 += x[j] * x[j];
            const float sigma2 = sumx2 / kQK_K;
            for (int j = 0; j < 16; ++j) {
                for (int l = 0; l < 16; ++l) weights[l] = qwb[16 * j + l] * std::sqrt(sigma2 + x[16 * j + l] * x[16 * j + l]);
                sw[j] = 0;
                for (int l = 0; l < 16; ++l) sw[j] += weights[l];
                scales[j] = ggml_fit::fit_with_min(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], -0.9f, 0.05f, 36);
            }
            uint8_t ls[16], lm[16];
            out.d = f32_to_f16(ggml_fit::fit_positive(16, 15, scales, ls, sw));
            out.dmin = f32_to_f16(ggml_fit::fit_positive(16, 15, mins, lm, sw));
            for (int j = 0; j < 16; ++j) out.scales[j] = uint8_t(ls[j] | (lm[j] << 4));
        }
        const float dm = f16_round(out.d), mm = f16_round(out.dmin);
        for (int j = 0; j < 16; ++j) {
            const float d = dm * float(out.scales[j] & 0xF);
            if (d == 0) continue;
            const float m = mm * float(out.scales[j] >> 4);
            for (int i = 0; i < 16; ++i) L[16 * j + i] = uint8_t(std::clamp(nearest_int((x[16 * j + i] + m) / d), 0, 3));
        }
        for (int j = 0; j < kQK_K; j += 128)
            for (int l = 0; l < 32; ++l)
                out.qs[j / 4 + l] = uint8_t(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
}

}  // namespace

bool ggml_exact(TensorType t) {
    switch (t) {
        case TensorType::F32: case TensorType::F16: case TensorType::BF16: case TensorType::Q8_0:
        case TensorType::Q4_0: case TensorType::Q2_K: case TensorType::Q4_K: case TensorType::Q5_K:
        case TensorType::Q6_K: case TensorType::IQ2_XXS:
            return true;
        default:
            return false;
    }
}

void quantize_rows(TensorType t, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                   const float* importance) {
    if (!quant::is_weight_format(t))
        fail("quantize: {} is not a weight format this engine writes ({})", tensor_type_name(t),
             quant::weight_format_names());
    const size_t rb = row_bytes(t, n_per_row);
    for (int64_t r = 0; r < nrows; ++r) {
        const float* x = src + r * n_per_row;
        uint8_t* out = static_cast<uint8_t*>(dst) + size_t(r) * rb;
        switch (t) {
            case TensorType::Q2_K: q2_k_row(x, reinterpret_cast<BlockQ2_K*>(out), n_per_row, importance); break;
            case TensorType::Q4_K: q4_k_row(x, reinterpret_cast<BlockQ4_K*>(out), n_per_row, importance); break;
            case TensorType::Q5_K:  // the engine's is ggml's reference, not its imatrix quantizer
                if (importance) q5_k_row(x, reinterpret_cast<BlockQ5_K*>(out), n_per_row, importance);
                else quant::quantize_row(t, x, out, n_per_row, nullptr);
                break;
            case TensorType::IQ2_XXS:
                if (importance) iq2_xxs_row_ggml(x, out, n_per_row, importance);
                else quant::quantize_row(t, x, out, n_per_row, nullptr);
                break;
            // Q8_0, Q4_0 and Q6_K: the engine's quantizers are ggml's, with and without importance
            // (tests/oracle/quant_*_oracle_test.cpp); F32/F16/BF16 conversions; MXFP4.
            default: quant::quantize_row(t, x, out, n_per_row, importance); break;
        }
    }
}

}  // namespace ds4::quantize
