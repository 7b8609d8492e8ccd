#include "quant/q2_k/q2_k.h"

#include "common/half.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/kquant_fit.h"
#include "quant/multi_dot.h"

namespace ds4::quant {

// Value 128n + 32j + l (n: half, j: bit pair, l < 32) has its code in bits 2j..2j+1 of byte
// qs[32n + l] and its scale/min in scales[8n + 2j + l/16].
void dequantize_q2_k(const BlockQ2_K* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const BlockQ2_K& x = src[b];
        const float d = f16_to_f32(x.d), dmin = f16_to_f32(x.dmin);
        float* y = dst + b * kQK_K;
        for (int half = 0; half < 2; ++half) {
            for (int j = 0; j < 4; ++j) {
                for (int l = 0; l < 32; ++l) {
                    const uint8_t s = x.scales[8 * half + 2 * j + l / 16];
                    const float dl = d * float(s & 15), ml = dmin * float(s >> 4);
                    const int q = (x.qs[32 * half + l] >> (2 * j)) & 3;
                    y[128 * half + 32 * j + l] = dl * float(q) - ml;
                }
            }
        }
    }
}

void quantize_q2_k(const float* src, BlockQ2_K* dst, int64_t n, const float* importance) {
    static constexpr KQuantShape kShape{16, 3, 15};
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const KQuantBlock f = fit_kquant_superblock(
            src + b * kQK_K, importance ? importance + b * kQK_K : nullptr, kShape);
        BlockQ2_K& y = dst[b];
        y.d = f.d;
        y.dmin = f.dmin;
        for (int j = 0; j < 16; ++j) y.scales[j] = uint8_t(f.sc[j] | (f.mn[j] << 4));
        for (int half = 0; half < 2; ++half)
            for (int l = 0; l < 32; ++l) {
                const uint8_t* q = f.q + 128 * half + l;
                y.qs[32 * half + l] = uint8_t(q[0] | (q[32] << 2) | (q[64] << 4) | (q[96] << 6));
            }
    }
}

// Per block: isum = sum over groups of sc * (codes . q8), msum = sum of mn * bsums (the min
// term needs only the activation's 16-value sums); block value d*d8*isum - dmin*d8*msum.
float dot_q2_k_q8_k_scalar(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    float sum = 0;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        int32_t isum = 0, msum = 0;
        for (int g = 0; g < 16; ++g) msum += int32_t(a[b].bsums[g]) * (x[b].scales[g] >> 4);
        for (int half = 0; half < 2; ++half) {
            for (int j = 0; j < 4; ++j) {
                for (int h = 0; h < 2; ++h) {
                    int32_t part = 0;
                    for (int l = 16 * h; l < 16 * h + 16; ++l)
                        part += ((x[b].qs[32 * half + l] >> (2 * j)) & 3) *
                                int32_t(a[b].qs[128 * half + 32 * j + l]);
                    isum += part * (x[b].scales[8 * half + 2 * j + h] & 15);
                }
            }
        }
        const float d = a[b].d * f16_to_f32(x[b].d), dmin = a[b].d * f16_to_f32(x[b].dmin);
        sum += d * float(isum) - dmin * float(msum);
    }
    return sum;
}

namespace {
void dequantize_fn(const void* src, float* dst, int64_t n) {
    dequantize_q2_k(static_cast<const BlockQ2_K*>(src), dst, n);
}
void quantize_fn(const float* src, void* dst, int64_t n, const float* importance) {
    quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), n, importance);
}
}  // namespace

constinit const FormatOps kQ2_KFormat{
    .type = TensorType::Q2_K,
    .dot_type = TensorType::Q8_K,
    .dequantize = dequantize_fn,
    .quantize = quantize_fn,
    .dot = {dot_q2_k_q8_k_scalar, dot_q2_k_q8_k_avx2, dot_q2_k_q8_k_avx512},
    .multi = {multi_scalar<dot_q2_k_q8_k_scalar>, multi_q2_k_avx2, multi_q2_k_avx512},
    .ggml_compat = compat::dot_q2_k,
    .multi_for_one_activation = true,
    .multi_blocks_rows = false,
};

}  // namespace ds4::quant
