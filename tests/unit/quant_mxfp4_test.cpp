// MXFP4 weights: E2M1 codes with a shared E8M0 exponent; quantizer and dot kernels.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/activation/activation.h"
#include "quant/mxfp4/mxfp4.h"
#include "support/quant_test_data.h"

namespace ds4::quant {
namespace {

using testing::Dist;

// E2M1 values of codes 0..15 (OCP Microscaling spec): sign bit 3, exponent bits 2-1, mantissa
// bit 0.
const float kE2M1[16] = {0, 0.5f, 1, 1.5f, 2, 3, 4, 6, -0.0f, -0.5f, -1, -1.5f, -2, -3, -4, -6};

TEST(QuantMxfp4, ScaleIsTwoToTheEMinus128) {
    EXPECT_EQ(mxfp4_scale(0), std::ldexp(1.0f, -128));
    EXPECT_EQ(mxfp4_scale(1), std::ldexp(1.0f, -127));
    EXPECT_EQ(mxfp4_scale(2), std::ldexp(1.0f, -126));
    EXPECT_EQ(mxfp4_scale(127), 0.5f);
    EXPECT_EQ(mxfp4_scale(254), std::ldexp(1.0f, 126));
}

TEST(QuantMxfp4, DequantizeDecodesE2M1TimesE8M0) {
    BlockMXFP4 b[2];
    b[0].e = 127;  // E8M0 1.0: values are the plain E2M1 values
    b[1].e = 130;  // 8.0
    for (int j = 0; j < 16; ++j) {
        b[0].qs[j] = uint8_t(j | ((15 - j) << 4));
        b[1].qs[j] = uint8_t(j | (j << 4));
    }
    float y[64];
    dequantize_row(TensorType::MXFP4, b, y, 64);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], kE2M1[j]) << j;
        EXPECT_EQ(y[16 + j], kE2M1[15 - j]) << j;
        EXPECT_EQ(y[32 + j], 8 * kE2M1[j]) << j;
        EXPECT_EQ(y[48 + j], 8 * kE2M1[j]) << j;
    }
}

TEST(QuantMxfp4, RepresentableBlocksRoundTripExactly) {
    for (int k : {-100, -3, 0, 5, 100}) {
        float x[32];
        for (int j = 0; j < 32; ++j) x[j] = std::ldexp(kE2M1[(j * 7) % 16], k);
        x[3] = std::ldexp(-6.0f, k);  // amax = 6 * 2^k fixes the exponent to 127 + k
        BlockMXFP4 b;
        quantize_row(TensorType::MXFP4, x, &b, 32);
        EXPECT_EQ(b.e, 127 + k);
        float y[32];
        dequantize_row(TensorType::MXFP4, &b, y, 32);
        for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], x[j]) << "k=" << k << " j=" << j;
    }
}

TEST(QuantMxfp4, NearestCodeLowestIndexWinsTiesAndLargeValuesSaturate) {
    float x[32] = {6.0f, 0.25f, -0.25f, 2.5f, 5.0f, -5.0f, 7.0f, -0.1f, 1.3f};
    BlockMXFP4 b;
    quantize_row(TensorType::MXFP4, x, &b, 32);
    ASSERT_EQ(b.e, 127);  // floor(log2 7) - 2 + 127
    auto code = [&](int j) { return j < 16 ? b.qs[j] & 15 : b.qs[j - 16] >> 4; };
    EXPECT_EQ(code(0), 7);   // 6
    EXPECT_EQ(code(1), 0);   // 0.25: tie 0 / 0.5 -> 0
    EXPECT_EQ(code(2), 0);   // -0.25: tie +0 / -0 / -0.5 -> +0
    EXPECT_EQ(code(3), 4);   // 2.5: tie 2 / 3 -> 2
    EXPECT_EQ(code(4), 6);   // 5: tie 4 / 6 -> 4
    EXPECT_EQ(code(5), 14);  // -5 -> -4
    EXPECT_EQ(code(6), 7);   // 7 saturates to 6
    EXPECT_EQ(code(7), 0);   // -0.1 -> +0
    EXPECT_EQ(code(8), 3);   // 1.3 -> 1.5
}

TEST(QuantMxfp4, ZeroAndTinyBlocksAreValid) {
    float x[64] = {};
    x[40] = 1e-38f;  // exponent below the E8M0 range: clamped to e = 0, not wrapped
    BlockMXFP4 b[2];
    quantize_row(TensorType::MXFP4, x, b, 64);
    EXPECT_EQ(b[0].e, 0);
    for (uint8_t q : b[0].qs) EXPECT_EQ(q, 0);
    EXPECT_EQ(b[1].e, 0);
    float y[64];
    dequantize_row(TensorType::MXFP4, b, y, 64);
    for (int j = 0; j < 64; ++j) EXPECT_LE(std::fabs(y[j] - x[j]), 1e-38f);
}

TEST(QuantMxfp4, EveryIsaHasItsOwnKernel) {
    const FormatOps* ops = format_ops(TensorType::MXFP4);
    ASSERT_NE(ops, nullptr);
    EXPECT_EQ(ops->dot_type, TensorType::Q8_0);
    EXPECT_EQ(ops->dot[0], &dot_mxfp4_scalar);
    EXPECT_EQ(ops->dot[1], &avx2::dot_mxfp4);
    EXPECT_EQ(ops->dot[2], &avx512::dot_mxfp4);
}

TEST(QuantMxfp4, ScalarDotMatchesDequantizedProducts) {
    const testing::DotCase c = testing::make_dot_case(TensorType::MXFP4, 4096, Dist::Outliers, 9);
    double exact = 0;
    for (size_t i = 0; i < c.wf.size(); ++i) exact += double(c.wf[i]) * c.af[i];
    const float got = dot_mxfp4_scalar(c.n, c.w.data(), c.a.data());
    EXPECT_LE(testing::dot_rel_err(got, exact, c.abs_sum()), 1e-6);
}

// Exact integer block sums in every kernel; float accumulation order differs. Measured
// worst: 1.4e-7 relative to sum |w_i a_i| (1..257 blocks, AVX2 and AVX-512 alike).
constexpr double kMxfp4DotTol = 1e-6;

TEST(QuantMxfp4, SimdDotsEqualScalar) {
    const std::vector<int64_t> sizes = {32, 64, 96, 15 * 32, 16 * 32, 17 * 32, 33 * 32,
                                        4096, 257 * 32};
    for (Isa isa : testing::supported_isas()) {
        if (isa == Isa::Scalar) continue;
        const double err = testing::max_err_vs_scalar(TensorType::MXFP4, isa, sizes);
        EXPECT_LE(err, kMxfp4DotTol) << isa_name(isa);
        RecordProperty(std::string("mxfp4_") + isa_name(isa), fmt::format("{:.3g}", err));
    }
}

// Every code against activations +-127 with unit scales (e = 128, d = 1): exact integers;
// also exponents 0 and 1 (subnormal scales) in the vector scale path.
TEST(QuantMxfp4, AllCodesAndSubnormalScalesInEveryKernel) {
    const int nb = 35;
    std::vector<BlockMXFP4> w(nb);
    std::vector<BlockQ8_0> a(nb);
    int64_t expect = 0;
    for (int b = 0; b < nb; ++b) {
        w[size_t(b)].e = 128;
        a[size_t(b)].d = f32_to_f16(1.0f);
        for (int j = 0; j < 16; ++j) {
            const int lo = (j + b) % 16, hi = (3 * j + b) % 16;
            w[size_t(b)].qs[j] = uint8_t(lo | (hi << 4));
            a[size_t(b)].qs[j] = int8_t(j % 2 ? 127 : -127);
            a[size_t(b)].qs[j + 16] = int8_t(j % 3 ? -127 : 127 - j);
            expect += int64_t(kMxfp4Values[lo]) * a[size_t(b)].qs[j] +
                      int64_t(kMxfp4Values[hi]) * a[size_t(b)].qs[j + 16];
        }
    }
    for (Isa isa : testing::supported_isas())
        EXPECT_EQ(format_ops(TensorType::MXFP4)->dot[int(isa)](nb * 32, w.data(), a.data()),
                  float(expect)) << isa_name(isa);

    // Subnormal exponents: compare with the scalar kernel (same float products per block).
    for (int b = 0; b < nb; ++b) w[size_t(b)].e = uint8_t(b % 3);  // 0, 1, 2
    const float ref = dot_mxfp4_scalar(nb * 32, w.data(), a.data());
    EXPECT_NE(ref, 0.0f);
    for (Isa isa : testing::supported_isas()) {
        const float got = format_ops(TensorType::MXFP4)->dot[int(isa)](nb * 32, w.data(), a.data());
        EXPECT_NEAR(got, ref, std::fabs(ref) * 1e-6) << isa_name(isa);
    }
}

}  // namespace
}  // namespace ds4::quant
