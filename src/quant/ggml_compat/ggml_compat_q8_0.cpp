// ggml compatibility kernels for the Q8_0-activation formats (ggml_compat.h):
// ggml_vec_dot_q8_0_q8_0, ggml_vec_dot_q4_0_q8_0 and ggml_vec_dot_mxfp4_q8_0 of ggml-cpu/arch/x86/quants.c, AVX2 path
// (the zen4 build has no AVX-512 code for them; Q8_0 sums its products with VPDPBUSD).
#include <cmath>
#include <cstdint>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/ggml_compat/ggml_compat_lanes.h"
#include "quant/mxfp4/mxfp4.h"

namespace ds4::quant::compat {
namespace {

constexpr int kLanes = 8;  // one __m256 of int32 sums / float accumulators

// Lane k of a 32-byte signed x signed product: the 4 products of bytes 4k..4k+3.
template <class Weight>
void lane_sums(Weight weight, const int8_t* act, int* sums) {
    for (int k = 0; k < kLanes; ++k) {
        int s = 0;
        for (int b = 4 * k; b < 4 * k + 4; ++b) s += signed_product(weight(b), act[b]);
        sums[k] = s;
    }
}

// A block's lanes added to acc: acc[k] = fma(scale, float(sum_k), acc[k]).
void fma_lanes(float scale, const int* sums, float* acc) {
    for (int k = 0; k < kLanes; ++k) acc[k] = std::fma(scale, float(sums[k]), acc[k]);
}

// MXFP4 value b of a block (low nibbles are values 0..15, high nibbles 16..31), doubled.
int8_t mxfp4_value(const BlockMXFP4& x, int b) {
    const uint8_t q = x.qs[b % 16];
    return kMxfp4Values[b < 16 ? (q & 15) : (q >> 4)];
}

}  // namespace

float dot_q8_0(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ8_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    float acc[kLanes] = {};
    int sums[kLanes];
    for (int64_t ib = 0; ib < n / kQK8_0; ++ib) {
        const float d = rounded(f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
        lane_sums([&](int b) { return x[ib].qs[b]; }, y[ib].qs, sums);
        fma_lanes(d, sums, acc);
    }
    return hsum8(acc);
}

// One block per step: the 32 codes (low nibbles values 0..15, high nibbles 16..31) minus 8
// against the activation, lane k = values 4k..4k+3, one fma by the rounded scale product.
float dot_q4_0(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ4_0*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    float acc[kLanes] = {};
    int sums[kLanes];
    for (int64_t ib = 0; ib < n / kQK4_0; ++ib) {
        const float d = rounded(f16_to_f32(x[ib].d) * f16_to_f32(y[ib].d));
        const auto code = [&](int b) { return int8_t((b < 16 ? x[ib].qs[b] & 15 : x[ib].qs[b - 16] >> 4) - 8); };
        lane_sums(code, y[ib].qs, sums);
        fma_lanes(d, sums, acc);
    }
    return hsum8(acc);
}

float dot_mxfp4(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockMXFP4*>(w);
    const auto* y = static_cast<const BlockQ8_0*>(act);
    const int64_t nb = n / kQK_MXFP4;
    // Block pairs: the even block into acc[0], the odd one into acc[1]; an odd last block is
    // added after the horizontal sum, with a scalar fma on its whole integer sum.
    float acc[2][kLanes] = {};
    int sums[kLanes];
    int64_t ib = 0;
    for (; ib + 1 < nb; ib += 2)
        for (int h = 0; h < 2; ++h) {
            const BlockMXFP4& xb = x[ib + h];
            const float scale = rounded(f16_to_f32(y[ib + h].d) * mxfp4_scale(xb.e));
            lane_sums([&](int b) { return mxfp4_value(xb, b); }, y[ib + h].qs, sums);
            fma_lanes(scale, sums, acc[h]);
        }
    float both[kLanes];
    for (int k = 0; k < kLanes; ++k) both[k] = acc[0][k] + acc[1][k];
    float sum = hsum8(both);
    for (; ib < nb; ++ib) {
        const float d = rounded(f16_to_f32(y[ib].d) * mxfp4_scale(x[ib].e));
        int sumi = 0;
        for (int b = 0; b < kQK_MXFP4; ++b) sumi += int(y[ib].qs[b]) * mxfp4_value(x[ib], b);
        sum = std::fma(float(sumi), d, sum);
    }
    return sum;
}

}  // namespace ds4::quant::compat
