// Q5_K: the byte layout (Q4_K's plus a high bit per code), dot kernels (scalar against the
// exact sum, SIMD against scalar on random and edge-scale blocks) and the quantizers'
// properties. Agreement with ggml itself (blocks byte for byte) is in
// tests/oracle/quant_q5_k_oracle_test.cpp.
#include <gtest/gtest.h>

#include "quant/activation/activation.h"
#include "quant/q4_k/q4_k.h"
#include "quant/q5_k/q5_k.h"
#include "support/kiq_test_util.h"

namespace ds4::kiq_test {
namespace {

constexpr TensorType kType = TensorType::Q5_K;
const std::initializer_list<int> kF16 = {0, 2};  // d, dmin

TEST(Q5K, DequantizeFollowsLayout) {
    quant::BlockQ5_K b{};
    b.d = f32_to_f16(1.0f);
    b.dmin = f32_to_f16(0.5f);
    b.scales[2] = 7;      // sub-block 2: scale 7
    b.scales[6] = 4;      //              min 4
    b.scales[9] = 0x32;   // sub-block 5: scale low nibble 2, min low nibble 3
    b.scales[1] = 0x40;   //              scale bits 4-5 = 1 -> 18
    b.scales[5] = 0x80;   //              min bits 4-5 = 2 -> 35
    b.qs[32 + 3] = 0x05;  // value 64+3 (sub-block 2): low bits 5
    b.qh[3] = 1 << 2;     //                           high bit -> code 21
    b.qs[64 + 7] = 0xa0;  // value 160+7 (sub-block 5): low bits 10, no high bit
    b.qh[9] = 1 << 5;     // value 160+9: high bit only -> code 16
    float y[256];
    quant::dequantize_row(kType, &b, y, 256);
    for (int i = 0; i < 256; ++i) {
        float want = 0;
        if (i >= 64 && i < 96) want = i == 67 ? 1 * 7 * 21 - 0.5f * 4 : -0.5f * 4;
        if (i >= 160 && i < 192) want = i == 167 ? 18 * 10 - 0.5f * 35 : i == 169 ? 18 * 16 - 0.5f * 35 : -0.5f * 35;
        EXPECT_EQ(y[i], want) << "value " << i;
    }
}

TEST(Q5K, OpsTableAndDotType) { expect_ops_table(kType); }

TEST(Q5K, ScalarDotEqualsExactSum) {
    std::mt19937 rng(1);
    double worst = 0;
    for (int rep = 0; rep < 50; ++rep) {
        const int64_t nb = 1 + rep % 9;
        const auto w = random_blocks(kType, nb, kF16, rng);
        const auto a = random_q8_k(nb, rng);
        const float got = quant::dot_q5_k_q8_k_scalar(nb * 256, w.data(), a.data());
        const double want = dot_reference(kType, nb * 256, w.data(), a.data());
        worst = std::max(worst, std::fabs(got - want) / dot_magnitude(kType, nb * 256, w.data(), a.data()));
    }
    EXPECT_LT(worst, 1e-6);  // float rounding of the per-block sums
    std::printf("Q5_K scalar dot vs exact: max |diff|/sum|w a| %.3g\n", worst);
}

TEST(Q5K, SimdKernelsEqualScalar) {
    int isas = 0;
    const double err = max_simd_error(kType, kF16, &isas);
    // Integer parts are exact; only the float accumulation order differs (as Q4_K: 3.5e-8).
    EXPECT_LT(err, 2e-7);
    std::printf("Q5_K SIMD vs scalar: %d ISAs, max |diff|/sum|w a| %.3g\n", isas, err);
}

TEST(Q5K, SimdKernelsEqualScalarOnEdgeScales) {
    const double err = max_simd_error_edge_scales(kType, kF16);
    EXPECT_LT(err, 2e-7);
    std::printf("Q5_K SIMD vs scalar, edge scales: max |diff|/sum|w a| %.3g\n", err);
}

TEST(Q5K, DotWithQuantizedActivationsApproximatesFloatDot) { expect_dot_approximates_float(kType); }

TEST(Q5K, QuantizeRoundTripError) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 3);
    for (const bool weighted : {false, true}) {
        const std::vector<float> ones(n, 1.f);
        std::vector<quant::BlockQ5_K> q(n / 256);
        quant::quantize_q5_k(x.data(), q.data(), n, weighted ? ones.data() : nullptr);
        std::vector<float> y(n);
        quant::dequantize_q5_k(q.data(), y.data(), n);
        const double e = rel_rmse(x, y, nullptr);
        EXPECT_LT(e, 0.04) << weighted;  // 5-bit codes: half Q4_K's error (measured 0.034 / 0.033)
        std::printf("Q5_K gaussian relative RMSE %.4f (%s)\n", e, weighted ? "importance 1" : "ggml reference");
    }
}

// ggml's reference refits every code to the rounded scale and min: each value is the nearest
// of its sub-block's 32 representable values (up to the float rounding of that division).
TEST(Q5K, ReferenceCodesAreNearestForTheChosenScales) {
    const int64_t n = 256 * 32;
    const auto x = gaussian(n, 4);
    std::vector<quant::BlockQ5_K> q(n / 256);
    quant::quantize_q5_k(x.data(), q.data(), n, nullptr);
    std::vector<float> y(n);
    quant::dequantize_q5_k(q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        const auto& b = q[i / 256];
        int sc, mn;
        quant::q4_k_scale_min(b.scales, int(i % 256) / 32, &sc, &mn);
        const float dl = f16_to_f32(b.d) * float(sc), ml = f16_to_f32(b.dmin) * float(mn);
        float best = INFINITY;
        for (int c = 0; c < 32; ++c) best = std::min(best, std::fabs(dl * float(c) - ml - x[i]));
        ASSERT_LE(std::fabs(y[i] - x[i]), best * (1 + 1e-5f) + 1e-6f) << "value " << i;
    }
}

TEST(Q5K, ZeroAndNonFiniteInputs) {
    std::vector<float> x(512, 0.f);
    std::vector<quant::BlockQ5_K> q(2);
    std::vector<float> y(512);
    for (const bool weighted : {false, true}) {
        const std::vector<float> ones(512, 1.f);
        const float* imp = weighted ? ones.data() : nullptr;
        std::fill(x.begin(), x.end(), 0.f);
        quant::quantize_q5_k(x.data(), q.data(), 512, imp);
        quant::dequantize_q5_k(q.data(), y.data(), 512);
        for (float v : y) EXPECT_EQ(v, 0.f);
    }
    x = gaussian(512, 5);
    x[3] = NAN;
    x[300] = INFINITY;
    const std::vector<float> ones(512, 1.f);
    quant::quantize_q5_k(x.data(), q.data(), 512, ones.data());  // the fit treats them as 0
    quant::dequantize_q5_k(q.data(), y.data(), 512);
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

TEST(Q5K, ImportanceLowersErrorWhereItIsHigh) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 6);
    std::vector<float> imp(n);
    for (int64_t i = 0; i < n; ++i) imp[i] = i % 8 == 0 ? 1000.f : 1.f;
    std::vector<quant::BlockQ5_K> flat(n / 256), weighted(n / 256);
    quant::quantize_q5_k(x.data(), flat.data(), n, nullptr);
    quant::quantize_q5_k(x.data(), weighted.data(), n, imp.data());
    std::vector<float> yf(n), yw(n);
    quant::dequantize_q5_k(flat.data(), yf.data(), n);
    quant::dequantize_q5_k(weighted.data(), yw.data(), n);
    const double ef = rel_rmse(x, yf, imp.data()), ew = rel_rmse(x, yw, imp.data());
    EXPECT_LT(ew, 0.9 * ef);
    std::printf("Q5_K importance-weighted error: flat %.4f, with importance %.4f\n", ef, ew);
}

}  // namespace
}  // namespace ds4::kiq_test
