#include "ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ds4::ops {
namespace {

TEST(Rope, PlainFrequencies) {
    Rope r(RopeParams{64, 10000.0f, false});
    ASSERT_EQ(r.freqs().size(), 32u);
    for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(r.freqs()[i], std::pow(10000.0, -i / 32.0));
}

TEST(Rope, FlashYarnBlend) {
    // spec/ARCHITECTURE.md §3.0: ramp bounds 15 and 25; pairs <= 15 unscaled, >= 25 divided by 16.
    RopeParams p{64, 160000.0f, true, 16.0f, 65536.0f, 32.0f, 1.0f};
    Rope r(p);
    for (int i = 0; i < 32; ++i) {
        const double f = std::pow(160000.0, -i / 32.0);
        if (i <= 15) {
            EXPECT_FLOAT_EQ(r.freqs()[i], f) << i;
        }
        if (i >= 25) {
            EXPECT_FLOAT_EQ(r.freqs()[i], f / 16.0) << i;
        }
        if (i > 15 && i < 25) {
            const double ramp = (i - 15) / 10.0;
            EXPECT_FLOAT_EQ(r.freqs()[i], f * ((1 - ramp) + ramp / 16)) << i;
        }
    }
    EXPECT_FLOAT_EQ(r.freqs()[0], 1.0f);
}

TEST(Rope, RotatesOnlyTheTailPairsAndInverts) {
    Rope r(RopeParams{16, 10000.0f, false});
    std::mt19937 rng(2);
    std::normal_distribution<float> g;
    const int heads = 3, hd = 48;
    std::vector<float> x(heads * hd);
    for (auto& v : x) v = g(rng);
    std::vector<float> y = x;
    r.apply(y.data(), heads, hd, 37);
    for (int h = 0; h < heads; ++h) {
        for (int d = 0; d < hd - 16; ++d) EXPECT_EQ(y[h * hd + d], x[h * hd + d]);
        for (int i = 0; i < 8; ++i) {  // pair (a, b) rotated by 37 * f_i
            const float a = x[h * hd + 32 + 2 * i], b = x[h * hd + 33 + 2 * i];
            const double phi = 37.0 * std::pow(10000.0, -i / 8.0);
            EXPECT_NEAR(y[h * hd + 32 + 2 * i], a * std::cos(phi) - b * std::sin(phi), 1e-4);
            EXPECT_NEAR(y[h * hd + 33 + 2 * i], a * std::sin(phi) + b * std::cos(phi), 1e-4);
        }
    }
    r.apply(y.data(), heads, hd, 37, /*inverse=*/true);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-5);
}

}  // namespace
}  // namespace ds4::ops
