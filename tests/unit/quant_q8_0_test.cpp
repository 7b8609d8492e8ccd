// Q8_0 weights: block layout, the reference quantizer, and the dot kernels (SIMD == scalar).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "quant/blocks.h"
#include "quant/activation/activation.h"
#include "quant/q8_0/q8_0.h"
#include "support/quant_test_data.h"

namespace ds4::quant {
namespace {

using testing::Dist;

TEST(QuantQ8_0, DequantizeIsScaleTimesCode) {
    BlockQ8_0 b[2];
    b[0].d = f32_to_f16(0.5f);
    b[1].d = f32_to_f16(-0.25f);
    for (int j = 0; j < 32; ++j) {
        b[0].qs[j] = int8_t(j - 16);
        b[1].qs[j] = int8_t(j == 0 ? -128 : 127 - j);
    }
    float y[64];
    dequantize_row(TensorType::Q8_0, b, y, 64);
    EXPECT_EQ(y[0], -8.0f);
    EXPECT_EQ(y[31], 7.5f);
    EXPECT_EQ(y[32], 32.0f);      // -128 * -0.25
    EXPECT_EQ(y[33], -31.5f);     // 126 * -0.25
    EXPECT_THROW(dequantize_row(TensorType::Q8_0, b, y, 48), Error);  // not whole blocks
}

TEST(QuantQ8_0, WeightQuantizerRoundsHalfAwayFromZero) {
    // amax 127 gives d = 1 exactly, so codes are round(x): ties go away from zero.
    float x[32] = {127.0f, 2.5f, -2.5f, 3.5f, 0.49f, -0.5f, -127.0f};
    BlockQ8_0 b;
    quantize_row(TensorType::Q8_0, x, &b, 32);
    EXPECT_EQ(f16_to_f32(b.d), 1.0f);
    EXPECT_EQ(b.qs[0], 127);
    EXPECT_EQ(b.qs[1], 3);
    EXPECT_EQ(b.qs[2], -3);
    EXPECT_EQ(b.qs[3], 4);
    EXPECT_EQ(b.qs[4], 0);
    EXPECT_EQ(b.qs[5], -1);
    EXPECT_EQ(b.qs[6], -127);
}

TEST(QuantQ8_0, ActivationQuantizerRoundsHalfToEven) {
    // The oracle's CPU from_float (x86) rounds ties to even, unlike the weight quantizer.
    float x[32] = {127.0f, 2.5f, -2.5f, 3.5f, 0.49f, -0.5f, -127.0f};
    BlockQ8_0 b;
    quantize_activation(TensorType::Q8_0, x, &b, 32);
    EXPECT_EQ(f16_to_f32(b.d), 1.0f);
    EXPECT_EQ(b.qs[0], 127);
    EXPECT_EQ(b.qs[1], 2);
    EXPECT_EQ(b.qs[2], -2);
    EXPECT_EQ(b.qs[3], 4);
    EXPECT_EQ(b.qs[4], 0);
    EXPECT_EQ(b.qs[5], 0);
    EXPECT_EQ(b.qs[6], -127);
}

TEST(QuantQ8_0, ZeroBlocksAndTinyBlocksGiveZeros) {
    float x[64] = {};
    x[40] = 1e-30f;  // block 1: d underflows f16
    BlockQ8_0 b[2];
    std::memset(b, 0x55, sizeof b);
    quantize_row(TensorType::Q8_0, x, b, 64);
    float y[64];
    dequantize_row(TensorType::Q8_0, b, y, 64);
    for (float v : y) EXPECT_EQ(v, 0.0f);
    EXPECT_EQ(b[0].d, 0);
    for (int8_t q : b[0].qs) EXPECT_EQ(q, 0);
}

// Reconstruction error of every value is at most half a step of the exact scale amax/127,
// plus what rounding that scale to f16 costs (127 codes x the f16 error; large for tiny
// blocks, where d is an f16 subnormal).
TEST(QuantQ8_0, RoundTripErrorIsHalfAStep) {
    for (Dist dist : testing::kAllDists) {
        const int64_t n = 32 * 1024;
        const std::vector<float> x = testing::random_values(dist, n, 11, 32);
        std::vector<BlockQ8_0> b(size_t(n / 32));
        std::vector<float> y(static_cast<size_t>(n));
        quantize_row(TensorType::Q8_0, x.data(), b.data(), n);
        dequantize_row(TensorType::Q8_0, b.data(), y.data(), n);
        for (int64_t blk = 0; blk < n / 32; ++blk) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[size_t(blk * 32 + j)]));
            const double d = amax / 127.0, d16 = f16_to_f32(b[size_t(blk)].d);
            const double bound = 0.5 * d + 127 * std::fabs(d - d16) + 1e-6 * amax;
            for (int j = 0; j < 32; ++j) {
                const size_t i = size_t(blk * 32 + j);
                ASSERT_LE(std::fabs(double(x[i]) - y[i]), bound)
                    << testing::dist_name(dist) << " i=" << i;
            }
        }
    }
}

TEST(QuantQ8_0, ScalarDotMatchesDequantizedProducts) {
    const testing::DotCase c = testing::make_dot_case(TensorType::Q8_0, 4096, Dist::Gaussian, 5);
    double exact = 0;
    for (size_t i = 0; i < c.wf.size(); ++i) exact += double(c.wf[i]) * c.af[i];
    const float got = dot_q8_0_scalar(c.n, c.w.data(), c.a.data());
    EXPECT_LE(testing::dot_rel_err(got, exact, c.abs_sum()), 1e-6);
}

TEST(QuantQ8_0, EveryIsaHasItsOwnKernel) {
    const FormatOps* ops = format_ops(TensorType::Q8_0);
    ASSERT_NE(ops, nullptr);
    EXPECT_EQ(ops->dot_type, TensorType::Q8_0);
    EXPECT_EQ(ops->dot[0], &dot_q8_0_scalar);
    EXPECT_EQ(ops->dot[1], &avx2::dot_q8_0);
    EXPECT_EQ(ops->dot[2], &avx512::dot_q8_0);
}

// Every kernel reproduces the scalar reference's arithmetic (quant/q8_0/q8_0.h): exact integer block
// sums, then one fused multiply-add per block in order. So SIMD equals scalar bit for bit, for
// any number of blocks and on every distribution; a kernel that summed in another order
// (pairs of blocks, lanes reduced at the end) or split the FMA fails this.
TEST(QuantQ8_0, SimdDotsEqualScalarBitForBit) {
    const std::vector<int64_t> sizes = {32, 64, 96, 15 * 32, 16 * 32, 17 * 32, 33 * 32,
                                        4096, 257 * 32};
    for (Isa isa : testing::supported_isas()) {
        if (isa == Isa::Scalar) continue;
        for (Dist dist : testing::kAllDists)
            for (int64_t n : sizes) {
                const testing::DotCase c = testing::make_dot_case(TensorType::Q8_0, n, dist, uint32_t(n));
                const float want = dot_q8_0_scalar(n, c.w.data(), c.a.data());
                const float got = format_ops(TensorType::Q8_0)->dot[int(isa)](n, c.w.data(), c.a.data());
                ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
                    << isa_name(isa) << " " << testing::dist_name(dist) << " n=" << n << ": " << got
                    << " vs " << want;
            }
    }
}

// Extreme codes: weights -128 and 127 against activations +-127 stress the sign trick and
// the int16 pair sums of the AVX2 path. All scales 1: the results are exact integers.
TEST(QuantQ8_0, ExtremeCodesAreExactInEveryKernel) {
    const int nb = 19;
    std::vector<BlockQ8_0> w(nb), a(nb);
    int64_t expect = 0;
    for (int b = 0; b < nb; ++b) {
        w[size_t(b)].d = a[size_t(b)].d = f32_to_f16(1.0f);
        for (int j = 0; j < 32; ++j) {
            const int8_t wq = int8_t((b + j) % 3 == 0 ? -128 : ((b + j) % 3 == 1 ? 127 : -1));
            const int8_t aq = int8_t((j % 2) ? 127 : -127);
            w[size_t(b)].qs[j] = wq;
            a[size_t(b)].qs[j] = aq;
            expect += int64_t(wq) * aq;
        }
    }
    for (Isa isa : testing::supported_isas())
        EXPECT_EQ(format_ops(TensorType::Q8_0)->dot[int(isa)](nb * 32, w.data(), a.data()),
                  float(expect))
            << isa_name(isa);
}

}  // namespace
}  // namespace ds4::quant
