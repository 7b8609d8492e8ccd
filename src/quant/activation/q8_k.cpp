// Activation quantizers: the Q8_0 and Q8_K blocks the quantized dot products take.
//
// Both must be bit-identical to what the oracle's CPU backend produces on x86 (its
// type_traits_cpu from_float), or the dot products see different inputs (spec/ORACLE.md):
// - Q8_0 (ggml-cpu/arch/x86 quantize_row_q8_0): d = amax/127 stored as f16,
//   q = round-half-even(x * (127/amax)). Note 127/amax, not 1/d, and ties to even: this is
//   NOT the weight quantizer (q8_0/q8_0.cpp), which follows ggml's reference (1/d, ties away).
// - Q8_K (ggml quantize_row_q8_K_ref, used as is on x86): m = the value of largest |x|
//   (first one wins, sign kept), iscale = -127/m, q = min(127, round-half-even(iscale*x)),
//   d = 1/iscale (so d is negative when m is positive), bsums = sums of 16 consecutive q.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/half.h"
#include "quant/activation/activation.h"

namespace ds4::quant {
namespace {

// Round to nearest, ties to even, for |x| < 2^22: adding 1.5*2^23 leaves no fraction bits,
// so the FPU's default rounding does the work. Same result as nearbyintf/cvtps2dq without
// depending on the rounding instructions of the baseline ISA.
inline int round_even(float x) {
    const float big = 12582912.0f;  // 1.5 * 2^23
    return int((x + big) - big);
}

}  // namespace

void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
        const float* x = src + b * kQK8_0;
        float amax = 0.0f;
        // std::max, not std::fmax: the same value for every input (a NaN |x| is skipped
        // either way, as amax never is one), without fmax's out-of-line libm call.
        for (int j = 0; j < kQK8_0; ++j) amax = std::max(amax, std::fabs(x[j]));
        dst[b].d = f32_to_f16(amax / 127.0f);
        const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
        for (int j = 0; j < kQK8_0; ++j) dst[b].qs[j] = int8_t(round_even(x[j] * id));
    }
}

void quantize_q8_k(const float* src, BlockQ8_K* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        BlockQ8_K& y = dst[b];
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < kQK_K; ++j) {
            const float ax = std::fabs(x[j]);
            if (ax > amax) {
                amax = ax;
                max = x[j];
            }
        }
        if (amax == 0.0f) {
            std::memset(&y, 0, sizeof y);
            continue;
        }
        const float iscale = -127.0f / max;
        for (int j = 0; j < kQK_K; ++j) {
            const int q = round_even(iscale * x[j]);
            y.qs[j] = int8_t(q < 127 ? q : 127);
        }
        for (int g = 0; g < kQK_K / 16; ++g) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += y.qs[16 * g + j];
            y.bsums[g] = int16_t(sum);
        }
        y.d = 1.0f / iscale;
    }
}

void dequantize_q8_k(const BlockQ8_K* src, float* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK_K; ++b)
        for (int j = 0; j < kQK_K; ++j) dst[b * kQK_K + j] = src[b].d * float(src[b].qs[j]);
}

}  // namespace ds4::quant
