// Q4_K: the byte layout of spec/ARCHITECTURE.md §2.5, dot kernels (scalar against the exact sum,
// SIMD against scalar) and the reference quantizer's properties. Agreement with ggml itself is
// in tests/oracle/quant_q4_k_oracle_test.cpp.
#include <gtest/gtest.h>

#include "quant/activation/activation.h"
#include "quant/q4_k/q4_k.h"
#include "support/kiq_test_util.h"

namespace ds4::kiq_test {
namespace {

constexpr TensorType kType = TensorType::Q4_K;
const std::initializer_list<int> kF16 = {0, 2};  // d, dmin

TEST(Q4K, DequantizeFollowsSpecLayout) {
    quant::BlockQ4_K b{};
    b.d = f32_to_f16(1.0f);
    b.dmin = f32_to_f16(0.5f);
    b.scales[2] = 7;     // sub-block 2: scale 7
    b.scales[6] = 4;     //              min 4
    b.scales[9] = 0x32;  // sub-block 5: scale low nibble 2, min low nibble 3
    b.scales[1] = 0x40;  //              scale bits 4-5 = 1 (top bits of byte 1) -> 18
    b.scales[5] = 0x80;  //              min bits 4-5 = 2 (top bits of byte 5) -> 35
    b.qs[32 + 3] = 0x05;  // chunk 1, low nibble: value 64+3 (sub-block 2), code 5
    b.qs[64 + 7] = 0xa0;  // chunk 2, high nibble: value 128+32+7 (sub-block 5), code 10
    float y[256];
    quant::dequantize_row(kType, &b, y, 256);
    for (int i = 0; i < 256; ++i) {
        float want = 0;
        if (i >= 64 && i < 96) want = i == 67 ? 1 * 7 * 5 - 0.5f * 4 : -0.5f * 4;
        if (i >= 160 && i < 192) want = i == 167 ? 1 * 18 * 10 - 0.5f * 35 : -0.5f * 35;
        EXPECT_EQ(y[i], want) << "value " << i;
    }
}

TEST(Q4K, OpsTableAndDotType) { expect_ops_table(kType); }

TEST(Q4K, ScalarDotEqualsExactSum) {
    std::mt19937 rng(1);
    double worst = 0;
    for (int rep = 0; rep < 50; ++rep) {
        const int64_t nb = 1 + rep % 9;
        const auto w = random_blocks(kType, nb, kF16, rng);
        const auto a = random_q8_k(nb, rng);
        const float got = quant::dot_q4_k_q8_k_scalar(nb * 256, w.data(), a.data());
        const double want = dot_reference(kType, nb * 256, w.data(), a.data());
        const double mag = dot_magnitude(kType, nb * 256, w.data(), a.data());
        worst = std::max(worst, std::fabs(got - want) / mag);
    }
    EXPECT_LT(worst, 1e-6);  // float rounding of the per-block sums
    std::printf("Q4_K scalar dot vs exact: max |diff|/sum|w a| %.3g\n", worst);
}

TEST(Q4K, SimdKernelsEqualScalar) {
    int isas = 0;
    const double err = max_simd_error(kType, kF16, &isas);
    // Integer parts are exact; only the float accumulation order differs. Measured 3.5e-8.
    EXPECT_LT(err, 2e-7);
    std::printf("Q4_K SIMD vs scalar: %d ISAs, max |diff|/sum|w a| %.3g\n", isas, err);
}

TEST(Q4K, DotWithQuantizedActivationsApproximatesFloatDot) { expect_dot_approximates_float(kType); }

TEST(Q4K, QuantizeRoundTripError) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 3);
    std::vector<quant::BlockQ4_K> q(n / 256);
    quant::quantize_q4_k(x.data(), q.data(), n, nullptr);
    std::vector<float> y(n);
    quant::dequantize_q4_k(q.data(), y.data(), n);
    const double e = rel_rmse(x, y, nullptr);
    EXPECT_LT(e, 0.075);  // 4-bit codes; measured 0.070
    std::printf("Q4_K gaussian relative RMSE %.4f\n", e);
}

TEST(Q4K, CodesAreNearestForTheChosenScales) {
    const int64_t n = 256 * 32;
    const auto x = gaussian(n, 4);
    std::vector<quant::BlockQ4_K> q(n / 256);
    quant::quantize_q4_k(x.data(), q.data(), n, nullptr);
    std::vector<float> y(n);
    quant::dequantize_q4_k(q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        // the 16 representable values of i's sub-block
        const auto& b = q[i / 256];
        const int r = int(i % 256);
        int sc, mn;
        quant::q4_k_scale_min(b.scales, r / 32, &sc, &mn);
        const float dl = f16_to_f32(b.d) * float(sc), ml = f16_to_f32(b.dmin) * float(mn);
        float best = INFINITY;
        for (int c = 0; c < 16; ++c) best = std::min(best, std::fabs(dl * float(c) - ml - x[i]));
        ASSERT_LE(std::fabs(y[i] - x[i]), best * (1 + 1e-5f) + 1e-7f) << "value " << i;
    }
}

TEST(Q4K, ZeroAndNonFiniteInputs) {
    std::vector<float> x(512, 0.f);
    std::vector<quant::BlockQ4_K> q(2);
    quant::quantize_q4_k(x.data(), q.data(), 512, nullptr);
    std::vector<float> y(512);
    quant::dequantize_q4_k(q.data(), y.data(), 512);
    for (float v : y) EXPECT_EQ(v, 0.f);
    x = gaussian(512, 5);
    x[3] = NAN;
    x[300] = INFINITY;
    x[301] = -INFINITY;
    quant::quantize_q4_k(x.data(), q.data(), 512, nullptr);
    quant::dequantize_q4_k(q.data(), y.data(), 512);
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

TEST(Q4K, ImportanceLowersErrorWhereItIsHigh) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 6);
    std::vector<float> imp(n);
    for (int64_t i = 0; i < n; ++i) imp[i] = i % 8 == 0 ? 1000.f : 1.f;  // a few that matter
    std::vector<quant::BlockQ4_K> flat(n / 256), weighted(n / 256);
    quant::quantize_q4_k(x.data(), flat.data(), n, nullptr);
    quant::quantize_q4_k(x.data(), weighted.data(), n, imp.data());
    std::vector<float> yf(n), yw(n);
    quant::dequantize_q4_k(flat.data(), yf.data(), n);
    quant::dequantize_q4_k(weighted.data(), yw.data(), n);
    const double ef = rel_rmse(x, yf, imp.data()), ew = rel_rmse(x, yw, imp.data());
    EXPECT_LT(ew, 0.9 * ef);
    std::printf("Q4_K importance-weighted error: flat %.4f, with importance %.4f\n", ef, ew);
}

}  // namespace
}  // namespace ds4::kiq_test
