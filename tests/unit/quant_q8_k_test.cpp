// The activation quantizers Q8_K and Q8_0 (activation/activation.h): scale conventions, rounding, bsums.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "common/error.h"
#include "common/half.h"
#include "quant/blocks.h"
#include "quant/activation/activation.h"
#include "quant/quant.h"
#include "support/quant_test_data.h"

namespace ds4::quant {
namespace {

using testing::Dist;

TEST(QuantQ8_K, ScaleIsSignedByTheLargestValue) {
    float x[512] = {};
    for (int j = 0; j < 256; ++j) x[j] = 0.01f * float(j % 50) - 0.2f;
    x[7] = 2.54f;    // largest |x|, positive: d = -2.54/127 (d < 0), q[7] = -127
    x[300] = -1.27f;  // block 1: largest negative: d = 1.27/127 > 0
    x[301] = 1.27f;   // same magnitude later: the first one decides the sign
    BlockQ8_K b[2];
    quantize_q8_k(x, b, 512);
    EXPECT_FLOAT_EQ(b[0].d, -2.54f / 127.0f);
    EXPECT_EQ(b[0].qs[7], -127);
    EXPECT_FLOAT_EQ(b[1].d, 1.27f / 127.0f);
    EXPECT_EQ(b[1].qs[300 - 256], -127);
    EXPECT_EQ(b[1].qs[301 - 256], 127);
    for (int blk = 0; blk < 2; ++blk)
        for (int g = 0; g < 16; ++g) {
            int sum = 0;
            for (int j = 0; j < 16; ++j) sum += b[blk].qs[16 * g + j];
            EXPECT_EQ(b[blk].bsums[g], sum);
        }
}

TEST(QuantQ8_K, RoundsHalfToEven) {
    float x[256] = {};
    x[0] = -127.0f;  // iscale = 1
    x[1] = 2.5f;
    x[2] = -2.5f;
    x[3] = 3.5f;
    x[4] = 0.5f;
    BlockQ8_K b;
    quantize_q8_k(x, &b, 256);
    EXPECT_EQ(b.d, 1.0f);
    EXPECT_EQ(b.qs[0], -127);
    EXPECT_EQ(b.qs[1], 2);
    EXPECT_EQ(b.qs[2], -2);
    EXPECT_EQ(b.qs[3], 4);
    EXPECT_EQ(b.qs[4], 0);
}

TEST(QuantQ8_K, ZeroBlockIsAllZero) {
    float x[256] = {};
    BlockQ8_K b;
    std::memset(&b, 0x5a, sizeof b);
    quantize_q8_k(x, &b, 256);
    EXPECT_EQ(b.d, 0.0f);
    for (int8_t q : b.qs) EXPECT_EQ(q, 0);
    for (int16_t s : b.bsums) EXPECT_EQ(s, 0);
}

TEST(QuantQ8_K, RoundTripErrorIsHalfAStep) {
    for (Dist dist : testing::kAllDists) {
        const int64_t n = 256 * 64;
        const std::vector<float> x = testing::random_values(dist, n, 21);
        std::vector<BlockQ8_K> b(size_t(n / 256));
        std::vector<float> y(static_cast<size_t>(n));
        quantize_activation(TensorType::Q8_K, x.data(), b.data(), n);
        dequantize_row(TensorType::Q8_K, b.data(), y.data(), n);
        for (int64_t i = 0; i < n; ++i) {
            const float d = std::fabs(b[size_t(i / 256)].d);
            ASSERT_LE(std::fabs(x[size_t(i)] - y[size_t(i)]), 0.5f * d * 1.0001f)
                << testing::dist_name(dist) << " i=" << i;
        }
    }
}

TEST(QuantQ8_K, RejectsPartialBlocks) {
    float x[300] = {};
    BlockQ8_K b[2];
    EXPECT_THROW(quantize_activation(TensorType::Q8_K, x, b, 300), Error);
    EXPECT_THROW(quantize_activation(TensorType::Q8_0, x, b, 40), Error);
}

// Q8_0 activations: d = amax/127 in f16, codes round(x * 127/amax) half to even, in
// [-127, 127] (the dot kernels rely on it).
TEST(QuantQ8_0Activation, CodesStayWithin127AndRoundTrip) {
    for (Dist dist : testing::kAllDists) {
        const int64_t n = 32 * 512;
        const std::vector<float> x = testing::random_values(dist, n, 31, 32);
        std::vector<BlockQ8_0> b(size_t(n / 32));
        quantize_q8_0(x.data(), b.data(), n);
        for (int64_t blk = 0; blk < n / 32; ++blk) {
            float amax = 0;
            for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[size_t(blk * 32 + j)]));
            EXPECT_EQ(b[size_t(blk)].d, f32_to_f16(amax / 127.0f));
            for (int j = 0; j < 32; ++j) {
                const int q = b[size_t(blk)].qs[j];
                ASSERT_GE(q, -127);
                ASSERT_LE(q, 127);
                if (amax == 0) continue;
                const float exact = x[size_t(blk * 32 + j)] * (127.0f / amax);
                ASSERT_LE(std::fabs(exact - float(q)), 0.5f) << testing::dist_name(dist);
            }
        }
    }
}

// The AVX-512 quantizers (what quantize_activation runs on such CPUs) give the references'
// bytes on every input: random distributions, exact ties, both signs of the largest |x|,
// NaN, infinities, signed zeros, subnormals.
std::vector<std::vector<float>> hostile_blocks(int block) {
    std::vector<std::vector<float>> out;
    const float nan = std::nanf(""), inf = INFINITY;
    auto make = [&](auto fill) {
        std::vector<float> x(static_cast<size_t>(block));
        for (int j = 0; j < block; ++j) x[size_t(j)] = 0.25f * float((j * 7) % 13) - 1.5f;
        fill(x);
        out.push_back(x);
    };
    make([](auto&) {});
    make([&](auto& x) { x[3] = nan; });
    make([&](auto& x) { x[0] = nan; x[block - 1] = nan; x[5] = 9.0f; });
    make([&](auto& x) { x[4] = inf; });
    make([&](auto& x) { x[4] = -inf; x[9] = inf; });
    make([&](auto& x) { for (auto& v : x) v = nan; });
    make([&](auto& x) { for (auto& v : x) v = -0.0f; });
    make([&](auto& x) { for (auto& v : x) v = 0.0f; x[2] = nan; });
    make([&](auto& x) { for (auto& v : x) v = 1e-42f; x[1] = -3e-42f; });
    make([&](auto& x) { x[2] = -4.0f; x[block - 2] = 4.0f; });  // equal |x|, the first is negative
    make([&](auto& x) { x[2] = 4.0f; x[block - 2] = -4.0f; });
    make([&](auto& x) { x[block - 1] = 8.0f; x[0] = -8.0f; });
    make([&](auto& x) {  // products exactly halfway between codes: amax = 127 makes the scale 1
        x[0] = -127.0f;
        for (int j = 1; j < block; ++j) x[size_t(j)] = float(j % 64) - 31.5f;
    });
    make([&](auto& x) { x[6] = 3.4e38f; x[7] = -3.4e38f; });
    return out;
}

TEST(QuantActivationSimd, Avx512MatchesTheReferenceBitForBit) {
    if (!isa_supported(Isa::Avx512Vnni)) GTEST_SKIP() << "no AVX-512 VNNI on this CPU";
    for (int pass = 0; pass < 2; ++pass) {
        const bool k = pass == 0;
        const int block = k ? kQK_K : kQK8_0;
        std::vector<std::vector<float>> cases = hostile_blocks(block);
        for (Dist dist : testing::kAllDists) cases.push_back(testing::random_values(dist, block * 64, 77, block));
        for (const auto& x : cases) {
            const int64_t n = int64_t(x.size());
            const size_t bytes = size_t(n / block) * (k ? sizeof(BlockQ8_K) : sizeof(BlockQ8_0));
            std::vector<uint8_t> ref(bytes, 0x11), got(bytes, 0x22);
            if (k) {
                quantize_q8_k(x.data(), reinterpret_cast<BlockQ8_K*>(ref.data()), n);
                avx512::quantize_q8_k(x.data(), reinterpret_cast<BlockQ8_K*>(got.data()), n);
            } else {
                quantize_q8_0(x.data(), reinterpret_cast<BlockQ8_0*>(ref.data()), n);
                avx512::quantize_q8_0(x.data(), reinterpret_cast<BlockQ8_0*>(got.data()), n);
            }
            for (size_t i = 0; i < bytes; ++i)
                ASSERT_EQ(int(ref[i]), int(got[i])) << (k ? "Q8_K" : "Q8_0") << " case " << (&x - cases.data())
                                                    << " byte " << i;
        }
    }
}

}  // namespace
}  // namespace ds4::quant
