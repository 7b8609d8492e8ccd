// Q4_0 weights (Q8_0 activations) against the oracle's ggml, on 1.5M values (6 distributions
// x 2^18): our quantizers write ggml's blocks byte for byte (the reference without importance,
// the imatrix quantizer with it), dequantization is bit-identical, and dots equal ggml's up to
// the float summation order.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "common/half.h"
#include "quant/blocks.h"
#include "support/quant_oracle_util.h"

namespace ds4::quant {
namespace {

using namespace testing;
constexpr TensorType kType = TensorType::Q4_0;

TEST(QuantQ4_0Oracle, WeightQuantizerIsGgmlsReference) {
    uint32_t seed = 100;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues, seed++, 32);
        EXPECT_TRUE(check_weight_quantizer(kType, x, dist_name(dist)))
            << dist_name(dist) << ": blocks differ from ggml_quantize_chunk";
    }
    // Values that land exactly on a code boundary (x / d + 8.5 an integer) or on -8 / +8.
    std::vector<float> edges(4096);
    for (size_t i = 0; i < edges.size(); ++i)
        edges[i] = (i % 32 == 0) ? -8.0f : (i % 32 == 1) ? 8.0f : float(int(i % 17) - 8) + 0.5f;
    EXPECT_EQ(quantizer_byte_difference(kType, edges, 4096, nullptr), -1);
}

TEST(QuantQ4_0Oracle, ImportanceQuantizerIsGgmlsImatrixQuantizer) {
    std::mt19937 rng(5);
    std::vector<float> imatrix(kOracleRow);
    for (float& w : imatrix) w = std::exp(2.0f * std::normal_distribution<float>(0.f, 1.f)(rng));
    const std::vector<float> ones(kOracleRow, 1.0f);
    uint32_t seed = 150;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues / 4, seed++, 32);
        EXPECT_EQ(quantizer_byte_difference(kType, x, kOracleRow, imatrix.data()), -1) << dist_name(dist);
        EXPECT_EQ(quantizer_byte_difference(kType, x, kOracleRow, ones.data()), -1) << dist_name(dist);
    }
}

TEST(QuantQ4_0Oracle, DequantizeIsBitIdentical) {
    uint32_t seed = 200;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues, seed++, 32);
        const std::vector<uint8_t> q = ggml_quantize(kType, x, kOracleRow);
        EXPECT_EQ(first_bit_difference(our_dequantize(kType, q, kOracleValues), ggml_dequantize(kType, q, kOracleValues)), -1)
            << dist_name(dist);
    }
    // Arbitrary blocks: every code, any finite f16 scale (subnormals and -0 too).
    std::mt19937 rng(7);
    std::vector<BlockQ4_0> b(size_t(kOracleValues / 32));
    for (BlockQ4_0& blk : b) {
        do blk.d = uint16_t(rng()); while ((blk.d & 0x7c00) == 0x7c00);
        for (uint8_t& q : blk.qs) q = uint8_t(rng());
    }
    std::vector<uint8_t> bytes(sizeof(BlockQ4_0) * b.size());
    std::memcpy(bytes.data(), b.data(), bytes.size());
    EXPECT_EQ(first_bit_difference(our_dequantize(kType, bytes, kOracleValues), ggml_dequantize(kType, bytes, kOracleValues)), -1);
}

// Same exact integer sums per 4 values as ggml; ours adds even and odd blocks into separate
// lanes (q4_0.h), ggml into one. Measured worst over all our kernels: 1.2e-7 of sum |w_i a_i|.
constexpr double kDotTol = 1e-6;

TEST(QuantQ4_0Oracle, DotsMatchGgmlVecDot) {
    uint32_t seed = 400;
    for (Dist dist : kAllDists) {
        const std::vector<uint8_t> w = ggml_quantize(kType, random_values(dist, kOracleValues, seed++, 32), kOracleRow);
        const std::vector<uint8_t> a =
            ggml_activation(TensorType::Q8_0, random_values(kAllDists[seed % 6], kOracleRow, seed + 50, 32));
        for (Isa isa : supported_isas()) {
            const double err = max_dot_err_vs_ggml(kType, isa, w, a);
            EXPECT_LE(err, kDotTol) << dist_name(dist) << " " << isa_name(isa);
            RecordProperty(fmt::format("{}_{}", dist_name(dist), isa_name(isa)), fmt::format("{:.3g}", err));
            std::printf("Q4_0 %s %s: max |ours-ggml|/sum|w a| %.3g\n", dist_name(dist), isa_name(isa), err);
        }
    }
}

}  // namespace
}  // namespace ds4::quant
