// ggml compatibility kernels for the float formats (ggml_compat.h): ggml_vec_dot_f32,
// ggml_vec_dot_f16 and ggml_vec_dot_bf16 of ggml-cpu/vec.cpp as the zen4 build compiles them.
#include <bit>
#include <cmath>
#include <cstdint>

#include "common/half.h"
#include "quant/ggml_compat/ggml_compat.h"
#include "quant/ggml_compat/ggml_compat_lanes.h"

namespace ds4::quant::compat {
namespace {

// GGML_F32_STEP / GGML_F32_EPR with AVX-512: four 16-lane accumulators, one fma per value;
// value i of each 64-value step goes to lane i % 64 (vector i / 16 % 4, lane i % 16).
constexpr int kStep = 64, kEpr = 16;

// GGML_F32_VEC_REDUCE: vectors (0 + 2) and (1 + 3), their sum, then the 16-lane hsum.
float reduce_64(const float* acc) {
    float v[kEpr];
    for (int l = 0; l < kEpr; ++l)
        v[l] = (acc[l] + acc[2 * kEpr + l]) + (acc[kEpr + l] + acc[3 * kEpr + l]);
    return hsum16(v);
}

// Accumulates the whole 64-value steps of x . y; returns how many values it consumed.
template <class Load>
int64_t accumulate_steps(int64_t n, Load load, float* acc) {
    const int64_t np = n & ~int64_t(kStep - 1);
    for (int l = 0; l < kStep; ++l) acc[l] = 0.0f;
    for (int64_t i = 0; i < np; i += kStep)
        for (int l = 0; l < kStep; ++l) {
            float xi, yi;
            load(i + l, xi, yi);
            acc[l] = std::fma(xi, yi, acc[l]);
        }
    return np;
}

// VDPBF16PS rounding: denormal inputs read as zero, denormal results flushed to zero.
float daz(float v) { return std::fpclassify(v) == FP_SUBNORMAL ? std::copysign(0.0f, v) : v; }

}  // namespace

float dot_f32(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const float*>(w);
    const auto* y = static_cast<const float*>(act);
    float acc[kStep];
    int64_t i = accumulate_steps(n, [&](int64_t k, float& a, float& b) { a = x[k], b = y[k]; }, acc);
    float sum = reduce_64(acc);
    // The tail `sumf += x[i]*y[i]` as GCC vectorized it: 16-value, then one 8-value chunk of
    // separately rounded products added in order, the last < 8 values contracted to fma.
    while (n - i >= 16)
        for (int k = 0; k < 16; ++k, ++i) sum += rounded(x[i] * y[i]);
    if (n - i >= 8)
        for (int k = 0; k < 8; ++k, ++i) sum += rounded(x[i] * y[i]);
    for (; i < n; ++i) sum = std::fma(x[i], y[i], sum);
    return sum;
}

float dot_f16(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(act);
    float acc[kStep];
    int64_t i = accumulate_steps(
        n, [&](int64_t k, float& a, float& b) { a = f16_to_f32(x[k]), b = f16_to_f32(y[k]); }, acc);
    // ggml_float (double) from here on; an f16 x f16 product is exact in float.
    double sum = reduce_64(acc);
    for (; i < n; ++i) sum += double(f16_to_f32(x[i]) * f16_to_f32(y[i]));
    return float(sum);
}

float bf16_pair_step(float acc, uint16_t a0, uint16_t a1, uint16_t b0, uint16_t b1) {
    acc = daz(std::fma(daz(bf16_to_f32(a1)), daz(bf16_to_f32(b1)), daz(acc)));
    return daz(std::fma(daz(bf16_to_f32(a0)), daz(bf16_to_f32(b0)), acc));
}

float dot_bf16(int64_t n, const void* w, const void* act) {
    const auto* x = static_cast<const uint16_t*>(w);
    const auto* y = static_cast<const uint16_t*>(act);
    // Two 16-lane VDPBF16PS accumulators per 64 values: c1 takes values 0..31 of the step, c2
    // values 32..63; lane j takes the pair (2j, 2j+1) of its 32.
    float c[2][kEpr] = {};
    int64_t i = 0;
    for (; i + kStep <= n; i += kStep)
        for (int h = 0; h < 2; ++h)
            for (int j = 0; j < kEpr; ++j) {
                const int64_t k = i + 32 * h + 2 * j;
                c[h][j] = bf16_pair_step(c[h][j], x[k], x[k + 1], y[k], y[k + 1]);
            }
    double sum = 0.0;
    sum += double(hsum16(c[0]));
    sum += double(hsum16(c[1]));
    for (; i < n; ++i) sum += double(bf16_to_f32(x[i]) * bf16_to_f32(y[i]));  // exact products
    return float(sum);
}

}  // namespace ds4::quant::compat
