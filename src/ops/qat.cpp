#include "ops/qat.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace ds4::ops {
namespace {

// 2^ceil(log2(x)) for a positive finite float, exactly (frexp gives x = m * 2^e, m in [.5, 1)).
float pow2_ceil_log2(float x) {
    int e;
    const float m = std::frexp(x, &e);
    return std::ldexp(1.0f, m == 0.5f ? e - 1 : e);
}

// Nearest multiple of `step` (a power of two) to a, ties to even multiple.
float round_to_step(float a, float step) { return std::nearbyint(a / step) * step; }

}  // namespace

float e4m3_round(float v) {
    const float a = std::fabs(v);
    float r;
    if (a < 0x1p-6f) {
        r = round_to_step(a, 0x1p-9f);  // subnormals: m * 2^-9
    } else {
        int e;
        std::frexp(a, &e);                        // a in [2^(e-1), 2^e)
        r = round_to_step(a, std::ldexp(1.0f, e - 4));  // 3 mantissa bits
    }
    r = std::min(r, 448.0f);
    return std::copysign(r, v);
}

float e2m1_round(float v) {
    // The grid is 0.5 apart below 2, 1 apart below 4, then {4, 6}: a multiple of the local step,
    // rounded to the nearest integer multiple with ties to even, is the nearest grid value with
    // ties to the even grid index (the tie points 0.25, 0.75, 1.25, 1.75, 2.5, 3.5 and 5 all go
    // to an even multiple). Adding and subtracting 1.5 * 2^23 rounds to an integer in the
    // default rounding mode, without a library call (searching the table cost ~2% of a prefill).
    const float a = std::min(std::fabs(v), 6.0f);
    const float step = a < 2.0f ? 0.5f : a < 4.0f ? 1.0f : 2.0f;
    const float k = (a / step + 0x1.8p23f) - 0x1.8p23f;  // a / step is exact, at most 12
    return std::copysign(k * step, v);
}

void fp8_roundtrip(float* x, int64_t n) {
    for (int64_t b = 0; b < n; b += 64) {
        const int64_t len = std::min<int64_t>(64, n - b);
        float amax = 0.0f;
        for (int64_t j = 0; j < len; ++j) amax = std::max(amax, std::fabs(x[b + j]));
        const float s = pow2_ceil_log2(std::max(amax, 1e-4f) / 448.0f);
        for (int64_t j = 0; j < len; ++j)
            x[b + j] = s * e4m3_round(std::clamp(x[b + j] / s, -448.0f, 448.0f));
    }
}

void fp4_roundtrip(float* x, int64_t n) {
    for (int64_t b = 0; b < n; b += 32) {
        const int64_t len = std::min<int64_t>(32, n - b);
        float amax = 0.0f;
        for (int64_t j = 0; j < len; ++j) amax = std::max(amax, std::fabs(x[b + j]));
        const float s = pow2_ceil_log2(std::max(amax, 6.0f * 0x1p-126f) / 6.0f);
        for (int64_t j = 0; j < len; ++j)
            x[b + j] = s * e2m1_round(std::clamp(x[b + j] / s, -6.0f, 6.0f));
    }
}

void hadamard(float* x, int64_t n) {
    if (n <= 0 || (n & (n - 1)) != 0) fail("hadamard: size {} is not a power of two", n);
    for (int64_t h = 1; h < n; h *= 2)
        for (int64_t i = 0; i < n; i += 2 * h)
            for (int64_t j = i; j < i + h; ++j) {
                const float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    const float scale = float(1.0 / std::sqrt(double(n)));
    for (int64_t i = 0; i < n; ++i) x[i] *= scale;
}

}  // namespace ds4::ops
