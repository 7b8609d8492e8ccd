#include "quant/q4_k/q4_k.h"

#include "common/half.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/kquant_fit.h"
#include "quant/multi_dot.h"

namespace ds4::quant {

// Chunk c (values 64c..64c+63) reads bytes qs[32c..32c+31]: low nibbles are sub-block 2c,
// high nibbles sub-block 2c+1.
void dequantize_q4_k(const BlockQ4_K* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const BlockQ4_K& x = src[b];
        const float d = f16_to_f32(x.d), dmin = f16_to_f32(x.dmin);
        float* y = dst + b * kQK_K;
        for (int c = 0; c < 4; ++c) {
            for (int h = 0; h < 2; ++h) {
                int sc, mn;
                q4_k_scale_min(x.scales, 2 * c + h, &sc, &mn);
                const float dl = d * float(sc), ml = dmin * float(mn);
                for (int l = 0; l < 32; ++l) {
                    const int q = (x.qs[32 * c + l] >> (4 * h)) & 15;
                    y[64 * c + 32 * h + l] = dl * float(q) - ml;
                }
            }
        }
    }
}

void quantize_q4_k(const float* src, BlockQ4_K* dst, int64_t n, const float* importance) {
    static constexpr KQuantShape kShape{32, 15, 63};
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const KQuantBlock f = fit_kquant_superblock(
            src + b * kQK_K, importance ? importance + b * kQK_K : nullptr, kShape);
        BlockQ4_K& y = dst[b];
        y.d = f.d;
        y.dmin = f.dmin;
        // Inverse of q4_k_scale_min: sub-blocks 4..7 keep their low 4 bits in bytes 8..11 and
        // their top 2 bits in the spare top bits of bytes 0..7.
        for (int j = 0; j < 4; ++j) {
            y.scales[j] = uint8_t(f.sc[j] | ((f.sc[j + 4] >> 4) << 6));
            y.scales[j + 4] = uint8_t(f.mn[j] | ((f.mn[j + 4] >> 4) << 6));
            y.scales[j + 8] = uint8_t((f.sc[j + 4] & 15) | ((f.mn[j + 4] & 15) << 4));
        }
        for (int c = 0; c < 4; ++c)
            for (int l = 0; l < 32; ++l)
                y.qs[32 * c + l] = uint8_t(f.q[64 * c + l] | (f.q[64 * c + 32 + l] << 4));
    }
}

// Per block: isum = sum_j sc_j * (codes_j . q8_j), msum = sum_j mn_j * (sum of the 32
// activations of sub-block j, from bsums); block value d*d8*isum - dmin*d8*msum.
float dot_q4_k_q8_k_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ4_K*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    float sum = 0;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        int32_t isum = 0, msum = 0;
        for (int j = 0; j < 8; ++j) {
            int sc, mn;
            q4_k_scale_min(x[b].scales, j, &sc, &mn);
            const int c = j / 2, shift = 4 * (j % 2);
            int32_t part = 0;
            for (int l = 0; l < 32; ++l)
                part += ((x[b].qs[32 * c + l] >> shift) & 15) * int32_t(a[b].qs[32 * j + l]);
            isum += sc * part;
            msum += mn * (int32_t(a[b].bsums[2 * j]) + a[b].bsums[2 * j + 1]);
        }
        const float d = a[b].d * f16_to_f32(x[b].d), dmin = a[b].d * f16_to_f32(x[b].dmin);
        sum += d * float(isum) - dmin * float(msum);
    }
    return sum;
}

namespace {
void dequantize_fn(const void* src, float* dst, int64_t n) {
    dequantize_q4_k(static_cast<const BlockQ4_K*>(src), dst, n);
}
void quantize_fn(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), n, importance);
}
}  // namespace

constinit const FormatOps kQ4_KFormat{
    .type = TensorType::Q4_K,
    .dot_type = TensorType::Q8_K,
    .dequantize = dequantize_fn,
    .quantize = quantize_fn,
    .dot = {dot_q4_k_q8_k_scalar, dot_q4_k_q8_k_avx2, dot_q4_k_q8_k_avx512},
    .multi = {multi_scalar<dot_q4_k_q8_k_scalar>, multi_q4_k_avx2, multi_q4_k_avx512},
    .ggml_compat = compat::dot_q4_k,
    .multi_for_one_activation = false,
    .multi_blocks_rows = false,
};

}  // namespace ds4::quant
