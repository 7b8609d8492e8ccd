// Q4_0 weights: block layout, the reference quantizer (ggml's rule), and the dot kernels:
// every SIMD kernel bit-identical to the scalar reference (q4_0.h's lane arithmetic) on random
// and edge-scale blocks. Agreement with ggml itself is in tests/oracle/quant_q4_0_oracle_test.cpp.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "common/error.h"
#include "common/half.h"
#include "quant/activation/activation.h"
#include "quant/blocks.h"
#include "quant/q4_0/q4_0.h"
#include "support/quant_test_data.h"

namespace ds4::quant {
namespace {

using testing::Dist;
constexpr TensorType kType = TensorType::Q4_0;

TEST(QuantQ4_0, DequantizeFollowsLayout) {
    BlockQ4_0 b[2];
    b[0].d = f32_to_f16(0.5f);
    b[1].d = f32_to_f16(-2.0f);
    for (int j = 0; j < 16; ++j) {
        b[0].qs[j] = uint8_t(j | (15 - j) << 4);
        b[1].qs[j] = 0x08;  // low nibble 8 (value 0), high nibble 0 (value -8)
    }
    float y[64];
    dequantize_row(kType, b, y, 64);
    for (int j = 0; j < 16; ++j) {
        EXPECT_EQ(y[j], 0.5f * float(j - 8));
        EXPECT_EQ(y[j + 16], 0.5f * float(7 - j));
        EXPECT_EQ(y[32 + j], 0.0f);
        EXPECT_EQ(y[48 + j], 16.0f);
    }
    EXPECT_THROW(dequantize_row(kType, b, y, 48), Error);  // not whole blocks
}

// ggml's rule: d = (value of largest magnitude) / -8, so that value gets code 0 exactly and
// the other end saturates at 15; codes truncate x / d + 8.5.
TEST(QuantQ4_0, ReferenceQuantizerFollowsGgmlsRule) {
    float x[32] = {};
    x[0] = -8.0f;  // largest magnitude: d = 1
    x[1] = 7.0f, x[2] = 8.0f, x[3] = 2.5f, x[4] = -2.5f, x[5] = 0.49f, x[17] = 3.0f;
    BlockQ4_0 b;
    quantize_row(kType, x, &b, 32);
    EXPECT_EQ(f16_to_f32(b.d), 1.0f);
    EXPECT_EQ(b.qs[0] & 15, 0);    // -8 -> 0
    EXPECT_EQ(b.qs[1] & 15, 15);   // 7 -> trunc(15.5)
    EXPECT_EQ(b.qs[2] & 15, 15);   // 8 -> min(15, 16)
    EXPECT_EQ(b.qs[3] & 15, 11);   // 2.5 -> trunc(11.0)
    EXPECT_EQ(b.qs[4] & 15, 6);    // -2.5 -> trunc(6.0)
    EXPECT_EQ(b.qs[5] & 15, 8);    // 0.49 -> trunc(8.99)
    EXPECT_EQ(b.qs[1] >> 4, 11);   // x[17] = 3 -> trunc(11.5)
    EXPECT_EQ(b.qs[6] >> 4, 8);    // 0 -> 8
}

TEST(QuantQ4_0, RoundTripErrorIsAStep) {
    for (Dist dist : testing::kAllDists) {
        const int64_t n = 32 * 512;
        const auto x = testing::random_values(dist, n, 11, 32);
        std::vector<BlockQ4_0> b(size_t(n / 32));
        std::vector<float> y(static_cast<size_t>(n));
        quantize_row(kType, x.data(), b.data(), n);
        dequantize_row(kType, b.data(), y.data(), n);
        for (int64_t blk = 0; blk < n / 32; ++blk) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[size_t(blk * 32 + j)]));
            // Truncation of x/d + 8.5 rounds to nearest, except the saturated top code (a whole
            // step off); plus what rounding d to f16 costs (8 codes x the f16 error; large for
            // tiny blocks, where d is an f16 subnormal).
            const double d = amax / 8.0, d16 = std::fabs(f16_to_f32(b[size_t(blk)].d));
            const double bound = d + 8 * std::fabs(d - d16) + 1e-6 * amax;
            for (int j = 0; j < 32; ++j) {
                const size_t i = size_t(blk * 32 + j);
                ASSERT_LE(std::fabs(double(x[i]) - y[i]), bound) << testing::dist_name(dist) << " i=" << i;
            }
        }
    }
}

TEST(QuantQ4_0, ZeroBlocksAndNonFiniteNeighbours) {
    std::vector<float> x(64, 0.f);
    std::vector<BlockQ4_0> b(2), c(2);
    std::vector<float> y(64);
    quantize_row(kType, x.data(), b.data(), 64);
    dequantize_row(kType, b.data(), y.data(), 64);
    for (float v : y) EXPECT_EQ(v, 0.f);
    EXPECT_EQ(f16_to_f32(b[0].d), 0.0f);  // -0 (0 / -8), as ggml's
    // A block of NaN and infinity leaves the next block's quantization unchanged.
    x = testing::random_values(Dist::Gaussian, 64, 9);
    quantize_row(kType, x.data(), b.data(), 64);
    x[3] = NAN;
    x[4] = INFINITY;
    quantize_row(kType, x.data(), c.data(), 64);
    EXPECT_EQ(std::memcmp(&b[1], &c[1], sizeof b[1]), 0);
}

TEST(QuantQ4_0, ScalarDotMatchesDequantizedProducts) {
    const testing::DotCase c = testing::make_dot_case(kType, 4096, Dist::Gaussian, 5);
    double exact = 0;
    for (size_t i = 0; i < c.wf.size(); ++i) exact += double(c.wf[i]) * c.af[i];
    const float got = dot_q4_0_q8_0_scalar(c.n, c.w.data(), c.a.data());
    EXPECT_LE(testing::dot_rel_err(got, exact, c.abs_sum()), 1e-6);
}

TEST(QuantQ4_0, EveryIsaHasItsOwnKernel) {
    const FormatOps* ops = format_ops(kType);
    ASSERT_NE(ops, nullptr);
    EXPECT_EQ(ops->dot_type, TensorType::Q8_0);
    EXPECT_EQ(ops->dot[0], &dot_q4_0_q8_0_scalar);
    EXPECT_EQ(ops->dot[1], &dot_q4_0_q8_0_avx2);
    EXPECT_EQ(ops->dot[2], &dot_q4_0_q8_0_avx512);
}

void expect_simd_bits_equal(const std::vector<uint8_t>& w, const std::vector<uint8_t>& a, int64_t n,
                            const char* what) {
    const float want = dot_q4_0_q8_0_scalar(n, w.data(), a.data());
    for (Isa isa : testing::supported_isas()) {
        const float got = format_ops(kType)->dot[int(isa)](n, w.data(), a.data());
        ASSERT_EQ(std::bit_cast<uint32_t>(got), std::bit_cast<uint32_t>(want))
            << isa_name(isa) << " " << what << " n=" << n << ": " << got << " vs " << want;
    }
}

// Every kernel reproduces q4_0.h's arithmetic: with an even/odd block split, a kernel that
// summed blocks in another order, fused differently or reduced its lanes in another tree
// fails here, for odd and even block counts and every distribution.
TEST(QuantQ4_0, SimdDotsEqualScalarBitForBit) {
    for (Dist dist : testing::kAllDists)
        for (int64_t n : {32, 64, 96, 15 * 32, 16 * 32, 17 * 32, 33 * 32, 4096, 257 * 32}) {
            const testing::DotCase c = testing::make_dot_case(kType, n, dist, uint32_t(n));
            expect_simd_bits_equal(c.w, c.a, n, testing::dist_name(dist));
        }
}

// Random codes with edge scales in the weights (zeros of both signs, denormals, +-65504) and
// in the activations: still bit-identical.
TEST(QuantQ4_0, SimdDotsEqualScalarOnEdgeScales) {
    constexpr uint16_t kEdge[] = {0x0000, 0x8000, 0x0001, 0x03ff, 0x8200, 0x7bff, 0xfbff, 0x3c00};
    std::mt19937 rng(3);
    for (int64_t nb : {1, 2, 3, 7, 16, 33}) {
        const int64_t n = nb * 32;
        for (int rep = 0; rep < 40; ++rep) {
            std::vector<uint8_t> w(row_bytes(kType, n)), a(row_bytes(TensorType::Q8_0, n));
            for (auto& v : w) v = uint8_t(rng());
            const auto x = testing::random_values(Dist::Gaussian, n, uint32_t(rng()));
            quantize_activation(TensorType::Q8_0, x.data(), a.data(), n);
            auto* wb = reinterpret_cast<BlockQ4_0*>(w.data());
            auto* ab = reinterpret_cast<BlockQ8_0*>(a.data());
            for (int64_t b = 0; b < nb; ++b) {
                wb[b].d = kEdge[rng() % std::size(kEdge)];
                if (rep % 4 == 0) ab[b].d = kEdge[rng() % std::size(kEdge)];
            }
            expect_simd_bits_equal(w, a, n, "edge scales");
        }
    }
}

// Codes 0 and 15 (-8 and 7) against activations +-127: the sign trick and pair sums at their
// largest; all scales 1, so the result is an exact integer in every kernel.
TEST(QuantQ4_0, ExtremeCodesAreExactInEveryKernel) {
    const int nb = 19;
    std::vector<BlockQ4_0> w(nb);
    std::vector<BlockQ8_0> a(nb);
    int64_t expect = 0;
    for (int b = 0; b < nb; ++b) {
        w[b].d = a[b].d = f32_to_f16(1.0f);
        for (int j = 0; j < 16; ++j) w[b].qs[j] = uint8_t((b + j) % 2 ? 0xf0 : 0x0f);
        for (int j = 0; j < 32; ++j) {
            a[b].qs[j] = int8_t((j % 3) ? 127 : -127);
            const int q = j < 16 ? w[b].qs[j] & 15 : w[b].qs[j - 16] >> 4;
            expect += int64_t(q - 8) * a[b].qs[j];
        }
    }
    for (Isa isa : testing::supported_isas())
        EXPECT_EQ(format_ops(kType)->dot[int(isa)](nb * 32, w.data(), a.data()), float(expect)) << isa_name(isa);
}

TEST(QuantQ4_0, ImportanceLowersErrorWhereItIsHigh) {
    const int64_t n = 32 * 256;
    const auto x = testing::random_values(Dist::Gaussian, n, 6);
    std::vector<float> imp(n);
    for (int64_t i = 0; i < n; ++i) imp[i] = i % 8 == 0 ? 1000.f : 1.f;
    std::vector<BlockQ4_0> flat(n / 32), weighted(n / 32);
    quantize_q4_0(x.data(), flat.data(), n, nullptr);
    quantize_q4_0(x.data(), weighted.data(), n, imp.data());
    std::vector<float> yf(n), yw(n);
    dequantize_q4_0(flat.data(), yf.data(), n);
    dequantize_q4_0(weighted.data(), yw.data(), n);
    double ef = 0, ew = 0;
    for (int64_t i = 0; i < n; ++i) {
        ef += imp[i] * (yf[i] - x[i]) * (yf[i] - x[i]);
        ew += imp[i] * (yw[i] - x[i]) * (yw[i] - x[i]);
    }
    EXPECT_LT(ew, 0.9 * ef);
    std::printf("Q4_0 importance-weighted squared error: flat %.4g, with importance %.4g\n", ef, ew);
}

}  // namespace
}  // namespace ds4::quant
