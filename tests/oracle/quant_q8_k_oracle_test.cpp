// Q8_K activations (the dot type of Q2_K, Q4_K, IQ2_XXS) against the oracle's CPU
// from_float, on 1.5M values (6 distributions x 2^18).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include "quant/blocks.h"
#include "support/quant_oracle_util.h"

namespace ds4::quant {
namespace {

using namespace testing;

TEST(QuantQ8_KOracle, ActivationQuantizerIsBitIdenticalToCpuFromFloat) {
    uint32_t seed = 100;
    for (Dist dist : kAllDists) {
        std::vector<float> x = random_values(dist, kOracleValues, seed++);
        // Blocks whose largest |x| appears with both signs, and exact ties after scaling.
        for (int j = 0; j < 256; ++j) x[size_t(j)] = float(j % 7) - 3.0f;
        for (int j = 0; j < 256; ++j) x[size_t(256 + j)] = j == 0 ? -127.0f : float(j % 9) * 0.5f;
        EXPECT_EQ(first_byte_difference(our_activation(TensorType::Q8_K, x),
                                        ggml_activation(TensorType::Q8_K, x)),
                  -1)
            << dist_name(dist);
    }
}

// ggml has no to_float trait for Q8_K; its exported dequantize_row_q8_K is the reference.
TEST(QuantQ8_KOracle, DequantizeIsBitIdentical) {
    ggml();  // loads libggml-base
    void* base = dlopen(DS4_ORACLE_BIN "/libggml-base.so", RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(base, nullptr);
    using Fn = void (*)(const void*, float*, int64_t);
    auto deq = reinterpret_cast<Fn>(dlsym(base, "dequantize_row_q8_K"));
    ASSERT_NE(deq, nullptr);
    uint32_t seed = 200;
    for (Dist dist : kAllDists) {
        const std::vector<float> x = random_values(dist, kOracleValues, seed++);
        const std::vector<uint8_t> q = ggml_activation(TensorType::Q8_K, x);
        std::vector<float> theirs(x.size());
        deq(q.data(), theirs.data(), kOracleValues);
        EXPECT_EQ(first_bit_difference(our_dequantize(TensorType::Q8_K, q, kOracleValues), theirs),
                  -1)
            << dist_name(dist);
    }
    dlclose(base);
}

}  // namespace
}  // namespace ds4::quant
