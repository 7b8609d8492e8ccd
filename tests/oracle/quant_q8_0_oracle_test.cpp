// Q8_0 weights and Q8_0 activations against the oracle's ggml, on 1.5M values (6
// distributions x 2^18).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <random>

#include "common/half.h"
#include "quant/blocks.h"
#include "support/quant_oracle_util.h"

namespace ds4::quant {
namespace {

using namespace testing;

TEST(QuantQ8_0Oracle, WeightQuantizerIsGgmlsReference) {
    uint32_t seed = 100;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues, seed++, 32);
        EXPECT_TRUE(check_weight_quantizer(TensorType::Q8_0, x, dist_name(dist)))
            << dist_name(dist) << ": blocks differ from ggml_quantize_chunk";
    }
}

TEST(QuantQ8_0Oracle, DequantizeIsBitIdentical) {
    uint32_t seed = 200;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues, seed++, 32);
        const std::vector<uint8_t> q = ggml_quantize(TensorType::Q8_0, x, kOracleRow);
        EXPECT_EQ(first_bit_difference(our_dequantize(TensorType::Q8_0, q, kOracleValues),
                                       ggml_dequantize(TensorType::Q8_0, q, kOracleValues)),
                  -1)
            << dist_name(dist);
    }
    // Arbitrary blocks: every code including -128, any finite f16 scale (subnormals too).
    std::mt19937 rng(7);
    std::vector<BlockQ8_0> b(size_t(kOracleValues / 32));
    for (BlockQ8_0& blk : b) {
        do blk.d = uint16_t(rng()); while ((blk.d & 0x7c00) == 0x7c00);
        for (int8_t& q : blk.qs) q = int8_t(rng());
    }
    std::vector<uint8_t> bytes(sizeof(BlockQ8_0) * b.size());
    std::memcpy(bytes.data(), b.data(), bytes.size());
    EXPECT_EQ(first_bit_difference(our_dequantize(TensorType::Q8_0, bytes, kOracleValues),
                                   ggml_dequantize(TensorType::Q8_0, bytes, kOracleValues)),
              -1);
}

TEST(QuantQ8_0Oracle, ActivationQuantizerIsBitIdenticalToCpuFromFloat) {
    uint32_t seed = 300;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues, seed++, 32);
        EXPECT_EQ(first_byte_difference(our_activation(TensorType::Q8_0, x),
                                        ggml_activation(TensorType::Q8_0, x)),
                  -1)
            << dist_name(dist);
    }
    // Ties: values that land exactly on k + 0.5 after scaling (amax 127 -> scale 1).
    std::vector<float> ties(4096);
    for (size_t i = 0; i < ties.size(); ++i)
        ties[i] = (i % 32 == 0) ? 127.0f : float(int(i % 253) - 126) + 0.5f;
    EXPECT_EQ(first_byte_difference(our_activation(TensorType::Q8_0, ties),
                                    ggml_activation(TensorType::Q8_0, ties)),
              -1);
}

// Same exact integer block sums as ggml; only the float accumulation of the per-block terms
// differs (ggml: 8 lanes of fmadd). Measured worst over all our kernels: 1.8e-7 of
// sum |w_i a_i| (rows of 4096).
constexpr double kDotTol = 1e-6;

TEST(QuantQ8_0Oracle, DotsMatchGgmlVecDot) {
    uint32_t seed = 400;
    for (Dist dist : kAllDists) {
        const std::vector<uint8_t> w = ggml_quantize(
            TensorType::Q8_0, random_values(dist, kOracleValues, seed++, 32), kOracleRow);
        const std::vector<uint8_t> a = our_activation(
            TensorType::Q8_0, random_values(kAllDists[seed % 6], kOracleRow, seed + 50, 32));
        for (Isa isa : supported_isas()) {
            const double err = max_dot_err_vs_ggml(TensorType::Q8_0, isa, w, a);
            EXPECT_LE(err, kDotTol) << dist_name(dist) << " " << isa_name(isa);
            RecordProperty(fmt::format("{}_{}", dist_name(dist), isa_name(isa)),
                           fmt::format("{:.3g}", err));
        }
    }
}

}  // namespace
}  // namespace ds4::quant
