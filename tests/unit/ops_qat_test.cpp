// The QAT simulations against their definitions (spec/ARCHITECTURE.md §3.0), written here
// independently: E4M3FN values decoded from their bit patterns, E2M1 from its table.
#include "ops/qat.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ds4::ops {
namespace {

// Non-negative E4M3FN values by code 0..126 (code 127 = NaN): s.eeee.mmm, bias 7.
std::vector<float> e4m3_values() {
    std::vector<float> v;
    for (int code = 0; code < 127; ++code) {
        const int e = code >> 3, m = code & 7;
        v.push_back(e == 0 ? std::ldexp(float(m), -9) : std::ldexp(1.0f + m / 8.0f, e - 7));
    }
    return v;
}

// Nearest table entry, ties to the even index (even mantissa / even grid index).
float nearest(const std::vector<float>& table, float v) {
    const float a = std::fabs(v);
    size_t best = 0;
    for (size_t i = 1; i < table.size(); ++i) {
        const float db = std::fabs(a - table[best]), d = std::fabs(a - table[i]);
        if (d < db || (d == db && i % 2 == 0)) best = i;
    }
    return std::copysign(table[best], v);
}

TEST(Qat, E4M3EveryRepresentableValueIsFixed) {
    const auto vals = e4m3_values();
    EXPECT_EQ(vals.back(), 448.0f);
    for (float v : vals) {
        EXPECT_EQ(e4m3_round(v), v);
        EXPECT_EQ(e4m3_round(-v), -v);
    }
}

TEST(Qat, E4M3RoundsToNearestTiesToEven) {
    const auto vals = e4m3_values();
    // Every midpoint between neighbours, and random values.
    for (size_t i = 0; i + 1 < vals.size(); ++i) {
        const float mid = 0.5f * (vals[i] + vals[i + 1]);
        EXPECT_EQ(e4m3_round(mid), nearest(vals, mid)) << mid;
        EXPECT_EQ(e4m3_round(mid), (i % 2 == 0) ? vals[i] : vals[i + 1]) << mid;
    }
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-448.0f, 448.0f);
    std::uniform_real_distribution<float> small(-0.05f, 0.05f);
    for (int k = 0; k < 100000; ++k) {
        const float v = (k & 1) ? u(rng) : small(rng);
        ASSERT_EQ(e4m3_round(v), nearest(vals, v)) << v;
    }
}

TEST(Qat, E2M1MatchesTheGrid) {
    const std::vector<float> grid = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    for (float g : grid) EXPECT_EQ(e2m1_round(g), g);
    EXPECT_EQ(e2m1_round(0.25f), 0.0f);   // ties go to the even index
    EXPECT_EQ(e2m1_round(0.75f), 1.0f);
    EXPECT_EQ(e2m1_round(1.25f), 1.0f);
    EXPECT_EQ(e2m1_round(2.5f), 2.0f);
    EXPECT_EQ(e2m1_round(5.0f), 4.0f);
    EXPECT_EQ(e2m1_round(-3.4f), -3.0f);
    std::mt19937 rng(3);
    std::uniform_real_distribution<float> u(-6.0f, 6.0f);
    for (int k = 0; k < 100000; ++k) {
        const float v = u(rng);
        ASSERT_EQ(e2m1_round(v), nearest(grid, v)) << v;
    }
    // Every float within 64 ulps of a tie point, a grid value or a step boundary, both signs.
    for (float c : {0.0f, 0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f, 2.0f, 2.5f, 3.0f, 3.5f, 4.0f,
                    5.0f, 6.0f}) {
        float lo = c, hi = c;
        for (int k = 0; k < 64; ++k) {
            lo = std::nextafter(lo, -1.0f);
            hi = std::nextafter(hi, 7.0f);
        }
        for (float v = lo; v <= std::min(hi, 6.0f); v = std::nextafter(v, 7.0f)) {
            ASSERT_EQ(e2m1_round(v), nearest(grid, v)) << v;
            ASSERT_EQ(e2m1_round(-v), nearest(grid, -v)) << -v;
        }
    }
}

TEST(Qat, Fp8RoundTripIsIdempotentAndOnTheScaledGrid) {
    std::mt19937 rng(11);
    std::normal_distribution<float> g(0.0f, 3.0f);
    const auto vals = e4m3_values();
    std::vector<float> x(448);
    for (auto& v : x) v = g(rng);
    x[5] = 1000.0f;  // an outlier sets its block's scale
    std::vector<float> y = x;
    fp8_roundtrip(y.data(), 448);
    for (int b = 0; b < 7; ++b) {
        float amax = 0;
        for (int j = 0; j < 64; ++j) amax = std::max(amax, std::fabs(x[b * 64 + j]));
        const float s = std::exp2(std::ceil(std::log2(amax / 448.0f)));
        for (int j = 0; j < 64; ++j) {
            const float q = y[b * 64 + j] / s;
            EXPECT_LE(std::fabs(q), 448.0f);
            EXPECT_EQ(q, nearest(vals, x[b * 64 + j] / s));
        }
    }
    std::vector<float> z = y;
    fp8_roundtrip(z.data(), 448);
    EXPECT_EQ(z, y);
    std::vector<float> zeros(64, 0.0f);
    fp8_roundtrip(zeros.data(), 64);  // amax floor 1e-4: zeros stay zeros, no NaN
    for (float v : zeros) EXPECT_EQ(v, 0.0f);
}

TEST(Qat, Fp4RoundTripIsIdempotentAndOnTheScaledGrid) {
    std::mt19937 rng(5);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const std::vector<float> grid = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6};
    std::vector<float> x(128);
    for (auto& v : x) v = g(rng);
    std::vector<float> y = x;
    fp4_roundtrip(y.data(), 128);
    for (int b = 0; b < 4; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b * 32 + j]));
        const float s = std::exp2(std::ceil(std::log2(amax / 6.0f)));
        for (int j = 0; j < 32; ++j) EXPECT_EQ(y[b * 32 + j] / s, nearest(grid, x[b * 32 + j] / s));
    }
    std::vector<float> z = y;
    fp4_roundtrip(z.data(), 128);
    EXPECT_EQ(z, y);
}

TEST(Qat, Hadamard128IsOrthonormalAndSelfInverse) {
    const int n = 128;
    // Columns H e_i: entries +-1/sqrt(128), pairwise orthogonal, unit norm.
    std::vector<std::vector<float>> cols(n, std::vector<float>(n, 0.0f));
    for (int i = 0; i < n; ++i) {
        cols[i][i] = 1.0f;
        hadamard(cols[i].data(), n);
        for (float v : cols[i]) EXPECT_NEAR(std::fabs(v), 1.0 / std::sqrt(128.0), 1e-7);
    }
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j) {
            double dot = 0;
            for (int k = 0; k < n; ++k) dot += double(cols[i][k]) * cols[j][k];
            EXPECT_NEAR(dot, i == j ? 1.0 : 0.0, 1e-6);
        }
    // Natural (Sylvester) order: H[i][j] = (-1)^popcount(i & j).
    for (int i = 0; i < n; ++i)
        for (int j = 0; j < n; ++j)
            EXPECT_EQ(cols[j][i] > 0, __builtin_popcount(i & j) % 2 == 0);
    std::mt19937 rng(1);
    std::normal_distribution<float> g;
    std::vector<float> x(n);
    for (auto& v : x) v = g(rng);
    std::vector<float> y = x;
    hadamard(y.data(), n);
    hadamard(y.data(), n);
    for (int i = 0; i < n; ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
}

}  // namespace
}  // namespace ds4::ops
