// F32, F16 and BF16 weights and activations against the oracle's ggml, on 1.5M values
// (6 distributions x 2^18) plus every 16-bit pattern.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>

#include "support/quant_oracle_util.h"

namespace ds4::quant {
namespace {

using namespace testing;

constexpr TensorType kFloatTypes[] = {TensorType::F32, TensorType::F16, TensorType::BF16};

TEST(QuantFloatOracle, DequantizeEvery16BitPatternIsBitIdentical) {
    std::vector<uint8_t> all(65536 * 2);
    for (uint32_t i = 0; i < 65536; ++i) {
        all[2 * i] = uint8_t(i);
        all[2 * i + 1] = uint8_t(i >> 8);
    }
    for (TensorType t : {TensorType::F16, TensorType::BF16}) {
        const std::vector<float> ours = our_dequantize(t, all, 65536);
        const std::vector<float> theirs = ggml_dequantize(t, all, 65536);
        EXPECT_EQ(first_bit_difference(ours, theirs), -1) << tensor_type_name(t);
    }
}

std::vector<float> special_values() {
    return {65520.0f,          // f16: rounds to inf
            65504.0f, 1.0f + 0x1p-11f,  // f16 tie
            1.0f + 0x1p-8f,    // bf16 tie
            1e-40f, -1e-45f,   // f32 subnormals
            5.9e-8f, 2.98e-8f, // f16 subnormal / underflow
            -INFINITY, INFINITY, 3e38f, -0.0f, 0.0f, 1.0f, -2.0f, 0.1f};
}

TEST(QuantFloatOracle, WeightConversionsAreBitIdentical) {
    uint32_t seed = 100;
    for (TensorType t : kFloatTypes) {
        for (Dist dist : kAllDists) {
            const std::vector<float> x = random_values(dist, kOracleValues, seed++);
            EXPECT_TRUE(check_weight_quantizer(t, x, dist_name(dist)))
                << tensor_type_name(t) << " " << dist_name(dist);
            const std::vector<uint8_t> q = our_quantize(t, x);
            EXPECT_EQ(first_bit_difference(our_dequantize(t, q, kOracleValues),
                                           ggml_dequantize(t, q, kOracleValues)),
                      -1);
        }
        const std::vector<float> x = special_values();
        const int64_t n = int64_t(x.size());
        std::vector<uint8_t> theirs(row_bytes(t, n));
        ggml().quantize_chunk(t, x.data(), theirs.data(), 1, n, nullptr);
        EXPECT_EQ(first_byte_difference(our_quantize(t, x), theirs), -1) << tensor_type_name(t);
    }
}

TEST(QuantFloatOracle, ActivationConversionsAreBitIdenticalToCpuFromFloat) {
    uint32_t seed = 200;
    for (TensorType t : kFloatTypes) {
        for (Dist dist : kAllDists) {
            std::vector<float> x = random_values(dist, kOracleValues, seed++);
            // ggml's AVX512-BF16 row conversion would flush subnormals; from_float (the
            // CPU trait used before a product) must not.
            const std::vector<float> sp = special_values();
            std::copy(sp.begin(), sp.end(), x.begin());
            EXPECT_EQ(first_byte_difference(our_activation(t, x), ggml_activation(t, x)), -1)
                << tensor_type_name(t) << " " << dist_name(dist);
        }
    }
}

// ggml sums in float lanes too (F16: fmadd in 8/16 lanes; BF16 on this CPU: vdpbf16ps), in
// a different order. Measured worst over all our kernels: 8.7e-8 (F32), 7.4e-8 (F16),
// 6.6e-8 (BF16) of sum |w_i a_i| over rows of 4096.
constexpr double kDotTol = 1e-6;

TEST(QuantFloatOracle, DotsMatchGgmlVecDot) {
    uint32_t seed = 300;
    for (TensorType t : kFloatTypes) {
        for (Dist dist : kAllDists) {
            const std::vector<uint8_t> w =
                our_quantize(t, random_values(dist, kOracleValues, seed++));
            const std::vector<uint8_t> a =
                our_activation(t, random_values(kAllDists[seed % 6], kOracleRow, seed + 50));
            for (Isa isa : supported_isas()) {
                const double err = max_dot_err_vs_ggml(t, isa, w, a);
                EXPECT_LE(err, kDotTol)
                    << tensor_type_name(t) << " " << dist_name(dist) << " " << isa_name(isa);
                RecordProperty(fmt::format("{}_{}_{}", tensor_type_name(t), dist_name(dist),
                                           isa_name(isa)),
                               fmt::format("{:.3g}", err));
            }
        }
    }
}

}  // namespace
}  // namespace ds4::quant
