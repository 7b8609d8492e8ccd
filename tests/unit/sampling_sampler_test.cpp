// Sampler: filters checked against hand-computed sets, seeded determinism, and a chi-square
// check that T=1 sampling follows the softmax.
#include "sampling/sampler.h"

#include "common/error.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <set>
#include <vector>

using namespace ds4::sampling;

namespace {

// logits = log of these weights, so probabilities are easy to state.
std::vector<float> logits_of(const std::vector<double>& weights) {
    std::vector<float> l;
    for (double w : weights) l.push_back(w > 0 ? float(std::log(w)) : -std::numeric_limits<float>::infinity());
    return l;
}

std::set<int32_t> ids(const std::vector<Candidate>& c) {
    std::set<int32_t> s;
    for (const auto& x : c) s.insert(x.id);
    return s;
}

SamplerParams plain() {
    SamplerParams p;
    p.min_p = 0;
    return p;
}

TEST(Sampler, DefaultsAreUpstreams) {
    const SamplerParams p;
    EXPECT_EQ(p.temperature, 1.0f);
    EXPECT_EQ(p.top_p, 1.0f);
    EXPECT_EQ(p.min_p, 0.05f);
    EXPECT_EQ(p.top_k, 0);
}

TEST(Sampler, ArgmaxAndGreedy) {
    const std::vector<float> l = {0.5f, 3.0f, std::nanf(""), 3.0f, -1.0f};
    EXPECT_EQ(argmax(l), 1);  // first of the tied maxima; NaN never wins
    SamplerParams p;
    p.temperature = 0;
    Sampler s(p);
    for (int i = 0; i < 20; ++i) EXPECT_EQ(s.sample(l), 1);
    EXPECT_THROW(argmax(std::vector<float>{}), ds4::Error);
    EXPECT_THROW(argmax(std::vector<float>{std::nanf("")}), ds4::Error);
}

TEST(Sampler, MinPIsRelativeToTopToken) {
    // p = 0.5, 0.3, 0.1, 0.06, 0.04: with min_p 0.1 the cut is 0.05 (= 0.1 * 0.5).
    const auto l = logits_of({0.5, 0.3, 0.1, 0.06, 0.04});
    SamplerParams p = plain();
    p.min_p = 0.1f;
    const auto c = Sampler(p).candidates(l);
    EXPECT_EQ(ids(c), (std::set<int32_t>{0, 1, 2, 3}));
    double sum = 0;
    for (const auto& x : c) sum += x.p;
    EXPECT_NEAR(sum, 1.0, 1e-6);
    EXPECT_NEAR(c[0].p, 0.5 / 0.96, 1e-6);
    // Default min_p = 0.05 → cut 0.025 keeps all five here, but drops a 0.02 token next to 0.5.
    EXPECT_EQ(Sampler().candidates(logits_of({0.5, 0.48, 0.02})).size(), 2u);
}

TEST(Sampler, TopKKeepsTheKBest) {
    const auto l = logits_of({0.1, 0.3, 0.05, 0.25, 0.2, 0.1});
    SamplerParams p = plain();
    p.top_k = 3;
    Sampler s(p);
    EXPECT_EQ(ids(s.candidates(l)), (std::set<int32_t>{1, 3, 4}));
    for (int i = 0; i < 2000; ++i) {
        const int32_t t = s.sample(l);
        EXPECT_TRUE(t == 1 || t == 3 || t == 4) << t;
    }
}

TEST(Sampler, TopPSmallestSetReachingMass) {
    const auto l = logits_of({0.1, 0.4, 0.3, 0.2});
    SamplerParams p = plain();
    p.top_p = 0.7f;  // 0.4 + 0.3 = 0.7 reaches it
    EXPECT_EQ(ids(Sampler(p).candidates(l)), (std::set<int32_t>{1, 2}));
    p.top_p = 0.71f;
    EXPECT_EQ(ids(Sampler(p).candidates(l)), (std::set<int32_t>{1, 2, 3}));
    p.top_p = 0.01f;
    EXPECT_EQ(ids(Sampler(p).candidates(l)), (std::set<int32_t>{1}));
}

TEST(Sampler, TemperatureSharpensAndFlattens) {
    const auto l = logits_of({0.6, 0.4});
    SamplerParams p = plain();
    p.temperature = 0.5f;  // p ∝ w^2: 0.36 : 0.16
    EXPECT_NEAR(Sampler(p).candidates(l)[0].p, 0.36 / 0.52, 1e-5);
    p.temperature = 2.0f;  // p ∝ sqrt(w)
    EXPECT_NEAR(Sampler(p).candidates(l)[0].p, std::sqrt(0.6) / (std::sqrt(0.6) + std::sqrt(0.4)), 1e-5);
}

TEST(Sampler, SeededDeterminism) {
    std::vector<float> l(1000);
    for (size_t i = 0; i < l.size(); ++i) l[i] = float(std::sin(double(i) * 0.37) * 3);
    SamplerParams p = plain();
    p.seed = 42;
    Sampler a(p), b(p);
    std::vector<int32_t> sa, sb;
    for (int i = 0; i < 500; ++i) {
        sa.push_back(a.sample(l));
        sb.push_back(b.sample(l));
    }
    EXPECT_EQ(sa, sb);
    p.seed = 43;
    Sampler c(p);
    std::vector<int32_t> sc;
    for (int i = 0; i < 500; ++i) sc.push_back(c.sample(l));
    EXPECT_NE(sa, sc);
    a.reseed(42);
    EXPECT_EQ(a.sample(l), sa[0]);
    // Pinned first draws of seed 42: the PRNG is our own, so these hold on every platform.
    Rng r(42);
    const uint64_t first = r.next();
    Rng r2(42);
    EXPECT_EQ(r2.next(), first);
    EXPECT_NE(Rng(1).next(), Rng(2).next());
}

TEST(Sampler, FollowsSoftmaxAtTemperatureOne) {
    const std::vector<double> w = {0.4, 0.25, 0.15, 0.1, 0.06, 0.04};
    SamplerParams p = plain();
    p.seed = 7;
    Sampler s(p);
    const int n = 60000;
    std::vector<int> count(w.size());
    for (int i = 0; i < n; ++i) ++count[size_t(s.sample(logits_of(w)))];
    double chi2 = 0;
    for (size_t i = 0; i < w.size(); ++i) {
        const double e = w[i] * n;
        chi2 += (count[i] - e) * (count[i] - e) / e;
    }
    // 5 degrees of freedom: P(chi2 > 20.5) ≈ 0.001. A wrong distribution lands far above.
    EXPECT_LT(chi2, 20.5);
}

TEST(Sampler, InfiniteLogits) {
    const float inf = std::numeric_limits<float>::infinity();
    Sampler s(plain());
    EXPECT_EQ(s.sample(std::vector<float>{0.f, inf, 1.f}), 1);
    for (int i = 0; i < 100; ++i) {
        const int32_t t = s.sample(std::vector<float>{-inf, 0.f, -inf, 0.f});
        EXPECT_TRUE(t == 1 || t == 3);
    }
}

}  // namespace
