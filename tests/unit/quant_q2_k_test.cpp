// Q2_K: the byte layout of spec/ARCHITECTURE.md §2.5, dot kernels (scalar against the exact sum,
// SIMD against scalar) and the reference quantizer's properties. Agreement with ggml itself is
// in tests/oracle/quant_q2_k_oracle_test.cpp.
#include <gtest/gtest.h>

#include "quant/activation/activation.h"
#include "quant/q2_k/q2_k.h"
#include "support/kiq_test_util.h"

namespace ds4::kiq_test {
namespace {

constexpr TensorType kType = TensorType::Q2_K;
const std::initializer_list<int> kF16 = {80, 82};  // d, dmin

TEST(Q2K, DequantizeFollowsSpecLayout) {
    quant::BlockQ2_K b{};
    b.d = f32_to_f16(1.0f);
    b.dmin = f32_to_f16(0.5f);
    b.scales[3] = 0x25;   // group 3: scale 5, min 2
    b.scales[14] = 0xf1;  // group 14: scale 1, min 15
    b.qs[16] = 0x0c;      // value 48 = half 0, bit pair 1, byte 16 -> group 3; code 3
    b.qs[37] = 0x80;      // value 229 = half 1, bit pair 3, byte 32+5 -> group 14; code 2
    float y[256];
    quant::dequantize_row(kType, &b, y, 256);
    for (int i = 0; i < 256; ++i) {
        float want = 0;
        if (i >= 48 && i < 64) want = i == 48 ? 1 * 5 * 3 - 0.5f * 2 : -0.5f * 2;
        if (i >= 224 && i < 240) want = i == 229 ? 1 * 1 * 2 - 0.5f * 15 : -0.5f * 15;
        EXPECT_EQ(y[i], want) << "value " << i;
    }
}

TEST(Q2K, OpsTableAndDotType) { expect_ops_table(kType); }

TEST(Q2K, ScalarDotEqualsExactSum) {
    std::mt19937 rng(1);
    double worst = 0;
    for (int rep = 0; rep < 50; ++rep) {
        const int64_t nb = 1 + rep % 9;
        const auto w = random_blocks(kType, nb, kF16, rng);
        const auto a = random_q8_k(nb, rng);
        const float got = quant::dot_q2_k_q8_k_scalar(nb * 256, w.data(), a.data());
        const double want = dot_reference(kType, nb * 256, w.data(), a.data());
        const double mag = dot_magnitude(kType, nb * 256, w.data(), a.data());
        worst = std::max(worst, std::fabs(got - want) / mag);
    }
    EXPECT_LT(worst, 1e-6);  // float rounding of the per-block sums
    std::printf("Q2_K scalar dot vs exact: max |diff|/sum|w a| %.3g\n", worst);
}

TEST(Q2K, SimdKernelsEqualScalar) {
    int isas = 0;
    const double err = max_simd_error(kType, kF16, &isas);
    // Integer parts are exact; only the float accumulation order differs. Measured 2.1e-8.
    EXPECT_LT(err, 2e-7);
    std::printf("Q2_K SIMD vs scalar: %d ISAs, max |diff|/sum|w a| %.3g\n", isas, err);
}

TEST(Q2K, DotWithQuantizedActivationsApproximatesFloatDot) { expect_dot_approximates_float(kType); }

TEST(Q2K, QuantizeRoundTripError) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 3);
    std::vector<quant::BlockQ2_K> q(n / 256);
    quant::quantize_q2_k(x.data(), q.data(), n, nullptr);
    std::vector<float> y(n);
    quant::dequantize_q2_k(q.data(), y.data(), n);
    const double e = rel_rmse(x, y, nullptr);
    EXPECT_LT(e, 0.28);  // 2-bit codes; measured 0.263
    std::printf("Q2_K gaussian relative RMSE %.4f\n", e);
}

TEST(Q2K, CodesAreNearestForTheChosenScales) {
    const int64_t n = 256 * 32;
    const auto x = gaussian(n, 4);
    std::vector<quant::BlockQ2_K> q(n / 256);
    quant::quantize_q2_k(x.data(), q.data(), n, nullptr);
    std::vector<float> y(n);
    quant::dequantize_q2_k(q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        // the four representable values of i's group
        const auto& b = q[i / 256];
        const int r = int(i % 256), group = 8 * (r / 128) + 2 * ((r % 128) / 32) + (r % 32) / 16;
        const float dl = f16_to_f32(b.d) * float(b.scales[group] & 15);
        const float ml = f16_to_f32(b.dmin) * float(b.scales[group] >> 4);
        float best = INFINITY;
        for (int c = 0; c < 4; ++c) best = std::min(best, std::fabs(dl * float(c) - ml - x[i]));
        ASSERT_LE(std::fabs(y[i] - x[i]), best * (1 + 1e-5f) + 1e-7f) << "value " << i;
    }
}

TEST(Q2K, ZeroAndNonFiniteInputs) {
    std::vector<float> x(512, 0.f);
    std::vector<quant::BlockQ2_K> q(2);
    quant::quantize_q2_k(x.data(), q.data(), 512, nullptr);
    std::vector<float> y(512);
    quant::dequantize_q2_k(q.data(), y.data(), 512);
    for (float v : y) EXPECT_EQ(v, 0.f);
    x = gaussian(512, 5);
    x[3] = NAN;
    x[300] = INFINITY;
    x[301] = -INFINITY;
    quant::quantize_q2_k(x.data(), q.data(), 512, nullptr);
    quant::dequantize_q2_k(q.data(), y.data(), 512);
    for (float v : y) EXPECT_TRUE(std::isfinite(v));
}

TEST(Q2K, ImportanceLowersErrorWhereItIsHigh) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 6);
    std::vector<float> imp(n);
    for (int64_t i = 0; i < n; ++i) imp[i] = i % 8 == 0 ? 1000.f : 1.f;  // a few that matter
    std::vector<quant::BlockQ2_K> flat(n / 256), weighted(n / 256);
    quant::quantize_q2_k(x.data(), flat.data(), n, nullptr);
    quant::quantize_q2_k(x.data(), weighted.data(), n, imp.data());
    std::vector<float> yf(n), yw(n);
    quant::dequantize_q2_k(flat.data(), yf.data(), n);
    quant::dequantize_q2_k(weighted.data(), yw.data(), n);
    const double ef = rel_rmse(x, yf, imp.data()), ew = rel_rmse(x, yw, imp.data());
    EXPECT_LT(ew, 0.9 * ef);
    std::printf("Q2_K importance-weighted error: flat %.4f, with importance %.4f\n", ef, ew);
}

}  // namespace
}  // namespace ds4::kiq_test
