// ggml compatibility kernels for the Q8_K-activation formats (ggml_compat.h):
// ggml_vec_dot_q2_K_q8_K, ggml_vec_dot_q4_K_q8_K, ggml_vec_dot_q5_K_q8_K,
// ggml_vec_dot_q6_K_q8_K and ggml_vec_dot_iq2_xxs_q8_K of
// ggml-cpu/arch/x86/quants.c, AVX2 path (the zen4 build has no AVX-512 code for them).
//
// Each keeps one 8-lane float accumulator: per super-block, lane k holds the exact integer sum
// of the products at positions 4k..4k+3 of every 32-value chunk, each weighted by its
// sub-block scale, and is added with a single fma by the super-block's float scale.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/ggml_compat/ggml_compat_lanes.h"
#include "quant/iq2_xxs/iq2_xxs.h"
#include "quant/iq2_xxs/iq2_xxs_grid.h"
#include "quant/q4_k/q4_k_scales.h"
#include "quant/q5_k/q5_k.h"
#include "quant/q6_k/q6_k.h"

namespace ds4::quant::compat {
namespace {

constexpr int kLanes = 8;

// sum over positions 4k..4k+3 of a 32-value chunk: w(b) * a[b] (unsigned weight codes).
template <class Weight>
int lane_chunk(int k, Weight w, const int8_t* a) {
    int s = 0;
    for (int b = 4 * k; b < 4 * k + 4; ++b) s += w(b) * int(a[b]);
    return s;
}

void fma_lanes(float scale, const int* sums, float* acc) {
    for (int k = 0; k < kLanes; ++k) acc[k] = std::fma(scale, float(sums[k]), acc[k]);
}

}  // namespace

float dot_q2_k(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ2_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(act);
    float acc[kLanes] = {};
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = rounded(y[i].d * f16_to_f32(x[i].d));
        const float dmin = rounded(-y[i].d * f16_to_f32(x[i].dmin));
        // Mins first: lane k = min(2k) * bsum(2k) + min(2k+1) * bsum(2k+1).
        int sums[kLanes];
        for (int k = 0; k < kLanes; ++k)
            sums[k] = (x[i].scales[2 * k] >> 4) * y[i].bsums[2 * k] +
                      (x[i].scales[2 * k + 1] >> 4) * y[i].bsums[2 * k + 1];
        fma_lanes(dmin, sums, acc);
        // 2 halves of 128 values x 4 bit-planes; plane l of half j covers values
        // 128j + 32l + (0..31), whose 16-value sub-blocks are 8j + 2l and 8j + 2l + 1.
        for (int k = 0; k < kLanes; ++k) {
            int s = 0;
            for (int j = 0; j < 2; ++j)
                for (int l = 0; l < 4; ++l) {
                    const uint8_t* q2 = x[i].qs + 32 * j;
                    const int sc = x[i].scales[8 * j + 2 * l + (k >= 4 ? 1 : 0)] & 15;
                    s += sc * lane_chunk(k, [&](int b) { return (q2[b] >> (2 * l)) & 3; },
                                         y[i].qs + 128 * j + 32 * l);
                }
            sums[k] = s;
        }
        fma_lanes(d, sums, acc);
    }
    return hsum8(acc);
}

float dot_q4_k(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ4_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(act);
    float acc[kLanes] = {};
    float acc_m[4] = {};  // the mins' own 4-lane accumulator
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = rounded(y[i].d * f16_to_f32(x[i].d));
        const float dmin = rounded(-y[i].d * f16_to_f32(x[i].dmin));
        const Q4KScales s = q4_k_unpack_scales(x[i].scales);
        uint8_t sc[8], mn[8];
        std::memcpy(sc, &s.sc, 8);
        std::memcpy(mn, &s.mn, 8);
        // Lane m: min(2m) * sum of the 32 values of sub-block 2m, plus the same for 2m + 1.
        for (int m = 0; m < 4; ++m) {
            int p = 0;
            for (int t = 2 * m; t < 2 * m + 2; ++t) p += mn[t] * (y[i].bsums[2 * t] + y[i].bsums[2 * t + 1]);
            acc_m[m] = std::fma(dmin, float(p), acc_m[m]);
        }
        // 4 chunks of 32 code bytes: low nibbles are sub-block 2j, high nibbles 2j + 1.
        int sums[kLanes];
        for (int k = 0; k < kLanes; ++k) {
            int t = 0;
            for (int j = 0; j < 4; ++j) {
                const uint8_t* q4 = x[i].qs + 32 * j;
                const int8_t* q8 = y[i].qs + 64 * j;
                t += sc[2 * j] * lane_chunk(k, [&](int b) { return q4[b] & 15; }, q8);
                t += sc[2 * j + 1] * lane_chunk(k, [&](int b) { return q4[b] >> 4; }, q8 + 32);
            }
            sums[k] = t;
        }
        fma_lanes(d, sums, acc);
    }
    return hsum8(acc) + hsum4(acc_m);
}

float dot_q5_k(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ5_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(act);
    float acc[kLanes] = {};
    float summs = 0.0f;  // the mins: one scalar, fused (the compiler contracts summs += dmin * m)
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = rounded(y[i].d * f16_to_f32(x[i].d));
        const float dmin = rounded(-y[i].d * f16_to_f32(x[i].dmin));
        const Q4KScales s = q4_k_unpack_scales(x[i].scales);
        uint8_t sc[8], mn[8];
        std::memcpy(sc, &s.sc, 8);
        std::memcpy(mn, &s.mn, 8);
        int m = 0;
        for (int j = 0; j < 8; ++j) m += mn[j] * (y[i].bsums[2 * j] + y[i].bsums[2 * j + 1]);
        summs = std::fma(dmin, float(m), summs);
        // Chunk c: sub-blocks 2c (low nibbles) and 2c + 1 (high nibbles), 5-bit codes.
        int sums[kLanes];
        for (int k = 0; k < kLanes; ++k) {
            int t = 0;
            for (int j = 0; j < 8; ++j)
                t += sc[j] * lane_chunk(k, [&](int b) { return q5_k_code(x[i], j, b); }, y[i].qs + 32 * j);
            sums[k] = t;
        }
        fma_lanes(d, sums, acc);
    }
    return hsum8(acc) + summs;
}

// The codes unsigned (0..63), each 32-value run's two 16-value scales on lanes 0-3 / 4-7, and
// the -32 offset per lane as 32 * (sc[2k] * bsum[2k] + sc[2k+1] * bsum[2k+1]).
float dot_q6_k(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockQ6_K*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(act);
    float acc[kLanes] = {};
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = rounded(y[i].d * f16_to_f32(x[i].d));
        const int8_t* sc = x[i].scales;
        int sums[kLanes];
        for (int k = 0; k < kLanes; ++k) {
            int t = 0;
            for (int r = 0; r < 8; ++r)  // 32-value runs
                t += sc[2 * r + (k >= 4)] *
                     lane_chunk(k, [&](int b) { return q6_k_code(x[i], 32 * r + b); }, y[i].qs + 32 * r);
            sums[k] = t - 32 * (sc[2 * k] * y[i].bsums[2 * k] + sc[2 * k + 1] * y[i].bsums[2 * k + 1]);
        }
        fma_lanes(d, sums, acc);
    }
    return hsum8(acc);
}

float dot_iq2_xxs(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const BlockIQ2_XXS*>(w);
    const auto* y = static_cast<const BlockQ8_K*>(act);
    float acc[kLanes] = {};
    for (int64_t i = 0; i < n / kQK_K; ++i) {
        const float d = rounded(f16_to_f32(x[i].d) * y[i].d);
        int sums[kLanes] = {};
        for (int c = 0; c < kQK_K / 32; ++c) {  // 32-value chunks
            uint32_t idx, sg;
            std::memcpy(&idx, x[i].qs + 4 * c, 4);
            std::memcpy(&sg, x[i].qs + 4 * c + 2, 4);
            const int scale = 2 * int(sg >> 28) + 1;
            const int8_t* q8 = y[i].qs + 32 * c;
            // Value b: grid byte b % 8 of point idx byte b / 8; its sign (bit b % 8 of the
            // sign mask of 7-bit field b / 8) is applied to the activation byte.
            auto signed_act = [&](int b) {
                const uint8_t mask = kIq2xxsSignMasks[(sg >> (7 * (b / 8))) & 127];
                return sign_byte(q8[b], int8_t((mask >> (b % 8)) & 1 ? -1 : 1));
            };
            for (int k = 0; k < kLanes; ++k) {
                int s = 0;
                for (int b = 4 * k; b < 4 * k + 4; ++b) {
                    const uint64_t point = kIq2xxsGrid[(idx >> (8 * (b / 8))) & 255];
                    s += int((point >> (8 * (b % 8))) & 255) * signed_act(b);
                }
                sums[k] += scale * s;
            }
        }
        fma_lanes(d, sums, acc);
    }
    return 0.125f * hsum8(acc);
}

}  // namespace ds4::quant::compat
