// MXFP4 weights (x Q8_0 activations) against the oracle's ggml, on 1.5M values (6
// distributions x 2^18).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "quant/blocks.h"
#include "support/quant_oracle_util.h"

namespace ds4::quant {
namespace {

using namespace testing;

TEST(QuantMxfp4Oracle, WeightQuantizerIsGgmlsReference) {
    uint32_t seed = 100;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues, seed++, 32);
        EXPECT_TRUE(check_weight_quantizer(TensorType::MXFP4, x, dist_name(dist)))
            << dist_name(dist) << ": blocks differ from ggml_quantize_chunk";
    }
}

TEST(QuantMxfp4Oracle, DequantizeIsBitIdentical) {
    uint32_t seed = 200;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues, seed++, 32);
        const std::vector<uint8_t> q = ggml_quantize(TensorType::MXFP4, x, kOracleRow);
        EXPECT_EQ(first_bit_difference(our_dequantize(TensorType::MXFP4, q, kOracleValues),
                                       ggml_dequantize(TensorType::MXFP4, q, kOracleValues)),
                  -1)
            << dist_name(dist);
    }
    // Arbitrary bytes: every exponent 0..255 (subnormal scales included) and every code.
    std::mt19937 rng(7);
    std::vector<uint8_t> bytes(sizeof(BlockMXFP4) * size_t(kOracleValues / 32));
    for (uint8_t& v : bytes) v = uint8_t(rng());
    EXPECT_EQ(first_bit_difference(our_dequantize(TensorType::MXFP4, bytes, kOracleValues),
                                   ggml_dequantize(TensorType::MXFP4, bytes, kOracleValues)),
              -1);
}

// Same exact integer block sums as ggml; only the float accumulation differs. Measured
// worst over all our kernels: 1.1e-7 of sum |w_i a_i| (rows of 4096).
constexpr double kDotTol = 1e-6;

TEST(QuantMxfp4Oracle, DotsMatchGgmlVecDot) {
    uint32_t seed = 400;
    for (Dist dist : kAllDists) {
        const std::vector<uint8_t> w = ggml_quantize(
            TensorType::MXFP4, random_values(dist, kOracleValues, seed++, 32), kOracleRow);
        const std::vector<uint8_t> a = our_activation(
            TensorType::Q8_0, random_values(kAllDists[seed % 6], kOracleRow, seed + 50, 32));
        for (Isa isa : supported_isas()) {
            const double err = max_dot_err_vs_ggml(TensorType::MXFP4, isa, w, a);
            EXPECT_LE(err, kDotTol) << dist_name(dist) << " " << isa_name(isa);
            RecordProperty(fmt::format("{}_{}", dist_name(dist), isa_name(isa)),
                           fmt::format("{:.3g}", err));
        }
    }
}

}  // namespace
}  // namespace ds4::quant
