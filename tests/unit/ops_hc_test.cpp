#include "ops/hc.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace ds4::ops {
namespace {

TEST(Hc, SinkhornEndsOnColumnNormalisation) {
    std::mt19937 rng(9);
    std::normal_distribution<float> g(0.0f, 2.0f);
    const int n = 4;
    std::vector<float> m(24), base(24), scale = {0.7f, 1.3f, 0.9f};
    for (auto& v : m) v = g(rng);
    for (auto& v : base) v = g(rng);
    HcMix mix = hc_split(m.data(), scale.data(), base.data(), n, 20, 1e-6f);
    for (int j = 0; j < n; ++j) {
        float col = 0;
        for (int i = 0; i < n; ++i) col += mix.comb[i * n + j];
        EXPECT_NEAR(col, 1.0f, 1e-5);
    }
    for (int i = 0; i < n; ++i) {
        float row = 0;
        for (int j = 0; j < n; ++j) row += mix.comb[i * n + j];
        EXPECT_NEAR(row, 1.0f, 1e-2);
    }
    for (int k = 0; k < n; ++k) {
        EXPECT_NEAR(mix.pre[k], 1.0f / (1.0f + std::exp(-(0.7f * m[k] + base[k]))) + 1e-6f, 1e-6);
        EXPECT_NEAR(mix.post[k], 2.0f / (1.0f + std::exp(-(1.3f * m[4 + k] + base[4 + k]))), 1e-6);
    }
}

TEST(Hc, OneIterationByHand) {
    // n = 2, iterations = 1: row softmax + eps, then one column normalisation.
    const float m[8] = {0, 0, 0, 0, 1.0f, 0.0f, 0.0f, 2.0f};
    const float base[8] = {};
    const float scale[3] = {1, 1, 1};
    const float eps = 0.01f;
    HcMix mix = hc_split(m, scale, base, 2, 1, eps);
    const double e1 = std::exp(1.0), e2 = std::exp(2.0);
    double C[2][2] = {{e1 / (e1 + 1) + eps, 1 / (e1 + 1) + eps},
                      {1 / (1 + e2) + eps, e2 / (1 + e2) + eps}};
    for (int j = 0; j < 2; ++j) {
        const double s = C[0][j] + C[1][j] + eps;
        for (int i = 0; i < 2; ++i) EXPECT_NEAR(mix.comb[i * 2 + j], C[i][j] / s, 1e-6);
    }
}

TEST(Hc, PostMixesSourcesIntoDestinations) {
    HcMix mix;
    mix.n_hc = 2;
    mix.post = {0.5f, 2.0f};
    mix.comb = {0.0f, 1.0f,   // source 0 -> destination 1
                1.0f, 0.0f};  // source 1 -> destination 0
    std::vector<float> X = {1, 2, 3, 10, 20, 30};  // streams [2][3]
    const std::vector<float> F = {100, 200, 300};
    hc_post(mix, F.data(), X.data(), 3);
    EXPECT_EQ(X, (std::vector<float>{60, 120, 180, 201, 402, 603}));
    std::vector<float> y(3);
    const float pre[2] = {1.0f, 0.5f};
    hc_weighted_sum(X.data(), pre, 2, 3, y.data());
    EXPECT_EQ(y, (std::vector<float>{160.5f, 321, 481.5f}));
}

// Widths past one column block (and not a multiple of it), four streams, random mixes: each
// destination is post_j F + sum_i comb_ij X_i of the values before the call.
TEST(Hc, PostOverManyColumnsMatchesTheDefinition) {
    std::mt19937 rng(4);
    std::normal_distribution<float> g(0.0f, 1.0f);
    for (int64_t D : {1, 63, 64, 65, 200, 4096}) {
        const int n = 4;
        HcMix mix;
        mix.n_hc = n;
        mix.post.resize(n);
        mix.comb.resize(size_t(n * n));
        for (auto& v : mix.post) v = g(rng);
        for (auto& v : mix.comb) v = g(rng);
        std::vector<float> X(size_t(n * D)), F(static_cast<size_t>(D));
        for (auto& v : X) v = g(rng);
        for (auto& v : F) v = g(rng);
        std::vector<double> want(X.size());
        for (int j = 0; j < n; ++j)
            for (int64_t c = 0; c < D; ++c) {
                double acc = double(mix.post[size_t(j)]) * F[size_t(c)];
                for (int i = 0; i < n; ++i) acc += double(mix.comb[size_t(i * n + j)]) * X[size_t(i * D + c)];
                want[size_t(j * D + c)] = acc;
            }
        hc_post(mix, F.data(), X.data(), D);
        for (size_t k = 0; k < X.size(); ++k) ASSERT_NEAR(X[k], want[k], 1e-5) << "D " << D << " at " << k;
    }
}

}  // namespace
}  // namespace ds4::ops
