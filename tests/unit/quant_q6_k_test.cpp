// Q6_K: the byte layout (q6_k.h), dot kernels (scalar against the exact sum, SIMD against
// scalar on random and edge-scale blocks) and the quantizers' properties. Agreement with ggml
// itself (blocks byte for byte) is in tests/oracle/quant_q6_k_oracle_test.cpp.
#include <gtest/gtest.h>

#include "quant/activation/activation.h"
#include "quant/q6_k/q6_k.h"
#include "support/kiq_test_util.h"

namespace ds4::kiq_test {
namespace {

constexpr TensorType kType = TensorType::Q6_K;
const std::initializer_list<int> kF16 = {208};  // d

TEST(Q6K, DequantizeFollowsLayout) {
    quant::BlockQ6_K b{};  // all codes 0: value -32 * d * sc
    b.d = f32_to_f16(0.5f);
    for (int g = 0; g < 16; ++g) b.scales[g] = int8_t(g - 8);
    // value 128 + 96 + 5 = 229 (half 1, run 3): high nibble of ql[64 + 32 + 5], qh[32 + 5] bits 6-7
    b.ql[64 + 32 + 5] = 0x90;
    b.qh[32 + 5] = 0x80;  // code 0b10'1001 = 41
    // value 32 + 1 = 33 (half 0, run 1): low nibble of ql[32 + 1], qh[1] bits 2-3
    b.ql[32 + 1] = 0x07;
    b.qh[1] = 0x0c;  // code 0b11'0111 = 55
    float y[256];
    quant::dequantize_row(kType, &b, y, 256);
    for (int i = 0; i < 256; ++i) {
        const int code = i == 229 ? 41 : i == 33 ? 55 : 0;
        EXPECT_EQ(y[i], 0.5f * float(i / 16 - 8) * float(code - 32)) << "value " << i;
    }
}

TEST(Q6K, OpsTableAndDotType) { expect_ops_table(kType); }

TEST(Q6K, ScalarDotEqualsExactSum) {
    std::mt19937 rng(1);
    double worst = 0;
    for (int rep = 0; rep < 50; ++rep) {
        const int64_t nb = 1 + rep % 9;
        const auto w = random_blocks(kType, nb, kF16, rng);
        const auto a = random_q8_k(nb, rng);
        const float got = quant::dot_q6_k_q8_k_scalar(nb * 256, w.data(), a.data());
        const double want = dot_reference(kType, nb * 256, w.data(), a.data());
        worst = std::max(worst, std::fabs(got - want) / dot_magnitude(kType, nb * 256, w.data(), a.data()));
    }
    EXPECT_LT(worst, 1e-6);
    std::printf("Q6_K scalar dot vs exact: max |diff|/sum|w a| %.3g\n", worst);
}

TEST(Q6K, SimdKernelsEqualScalar) {
    int isas = 0;
    const double err = max_simd_error(kType, kF16, &isas);
    EXPECT_LT(err, 2e-7);
    std::printf("Q6_K SIMD vs scalar: %d ISAs, max |diff|/sum|w a| %.3g\n", isas, err);
}

TEST(Q6K, SimdKernelsEqualScalarOnEdgeScales) {
    const double err = max_simd_error_edge_scales(kType, kF16);
    EXPECT_LT(err, 2e-7);
    std::printf("Q6_K SIMD vs scalar, edge scales: max |diff|/sum|w a| %.3g\n", err);
}

// The extreme codes (0 and 63) and scales (-128, 127) with activations +-127: the unsigned
// pair sums (2 * 63 * 127) and the offset term at their largest, every kernel exact (d = 1).
TEST(Q6K, ExtremeCodesAndScalesAreExact) {
    const int nb = 3;
    std::vector<quant::BlockQ6_K> w(nb);
    std::vector<quant::BlockQ8_K> a(nb);
    double want = 0;
    for (int b = 0; b < nb; ++b) {
        w[b].d = f32_to_f16(1.0f);
        for (int g = 0; g < 16; ++g) w[b].scales[g] = int8_t((g + b) % 2 ? 127 : -128);
        for (auto& v : w[b].ql) v = (b % 2) ? 0xff : 0x0f;
        for (auto& v : w[b].qh) v = (b % 2) ? 0xff : 0x33;
        a[b].d = 1.0f;
        for (int i = 0; i < 256; ++i) a[b].qs[i] = int8_t((i + b) % 3 ? 127 : -127);
        for (int g = 0; g < 16; ++g) {
            int s = 0;
            for (int i = 0; i < 16; ++i) s += a[b].qs[16 * g + i];
            a[b].bsums[g] = int16_t(s);
        }
        for (int i = 0; i < 256; ++i)
            want += double(w[b].scales[i / 16]) * (quant::q6_k_code(w[b], i) - 32) * a[b].qs[i];
    }
    for (int isa = 0; isa < quant::kIsaCount; ++isa) {
        if (!quant::isa_supported(quant::Isa(isa))) continue;
        EXPECT_EQ(quant::format_ops(kType)->dot[isa](nb * 256, w.data(), a.data()), float(want))
                << quant::isa_name(quant::Isa(isa));
    }
}

TEST(Q6K, DotWithQuantizedActivationsApproximatesFloatDot) { expect_dot_approximates_float(kType); }

TEST(Q6K, QuantizeRoundTripError) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 3);
    std::vector<quant::BlockQ6_K> q(n / 256);
    quant::quantize_q6_k(x.data(), q.data(), n, nullptr);
    std::vector<float> y(n);
    quant::dequantize_q6_k(q.data(), y.data(), n);
    const double e = rel_rmse(x, y, nullptr);
    EXPECT_LT(e, 0.02);  // 6-bit codes
    std::printf("Q6_K gaussian relative RMSE %.4f\n", e);
}

// The code refit after the scales are rounded: each value is the nearest of the 64 its
// 16-value group can represent.
TEST(Q6K, CodesAreNearestForTheChosenScales) {
    const int64_t n = 256 * 32;
    const auto x = gaussian(n, 4);
    std::vector<quant::BlockQ6_K> q(n / 256);
    quant::quantize_q6_k(x.data(), q.data(), n, nullptr);
    std::vector<float> y(n);
    quant::dequantize_q6_k(q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
        const auto& b = q[i / 256];
        const float dl = f16_to_f32(b.d) * float(b.scales[(i % 256) / 16]);
        float best = INFINITY;
        for (int c = -32; c < 32; ++c) best = std::min(best, std::fabs(dl * float(c) - x[i]));
        ASSERT_LE(std::fabs(y[i] - x[i]), best * (1 + 1e-5f) + 1e-6f) << "value " << i;
    }
}

TEST(Q6K, ZeroBlocksAreAllZero) {
    std::vector<float> x(512, 0.f);
    x[300] = 1e-20f;  // below ggml's group threshold: still a zero block
    std::vector<quant::BlockQ6_K> q(2);
    std::memset(q.data(), 0x5a, q.size() * sizeof q[0]);
    quant::quantize_q6_k(x.data(), q.data(), 512, nullptr);
    const quant::BlockQ6_K zero{};
    for (const auto& b : q) EXPECT_EQ(std::memcmp(&b, &zero, sizeof b), 0);
}

TEST(Q6K, ImportanceLowersErrorWhereItIsHigh) {
    const int64_t n = 256 * 64;
    const auto x = gaussian(n, 6);
    std::vector<float> imp(n);
    for (int64_t i = 0; i < n; ++i) imp[i] = i % 8 == 0 ? 1000.f : 1.f;
    std::vector<quant::BlockQ6_K> flat(n / 256), weighted(n / 256);
    quant::quantize_q6_k(x.data(), flat.data(), n, nullptr);
    quant::quantize_q6_k(x.data(), weighted.data(), n, imp.data());
    std::vector<float> yf(n), yw(n);
    quant::dequantize_q6_k(flat.data(), yf.data(), n);
    quant::dequantize_q6_k(weighted.data(), yw.data(), n);
    const double ef = rel_rmse(x, yf, imp.data()), ew = rel_rmse(x, yw, imp.data());
    EXPECT_LT(ew, ef);
    std::printf("Q6_K importance-weighted error: flat %.4f, with importance %.4f\n", ef, ew);
}

}  // namespace
}  // namespace ds4::kiq_test
