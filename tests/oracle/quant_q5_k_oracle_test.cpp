// Q5_K against the oracle's ggml: our reference quantizer writes ggml's blocks byte for byte
// (quantize_row_q5_K_ref, through ggml_quantize_chunk without an importance matrix),
// dequantization is bit-identical, and dots equal ggml's up to the float summation order.
#include <gtest/gtest.h>

#include "support/kiq_oracle_checks.h"
#include "support/quant_oracle_util.h"

namespace ds4::kiq_test {
namespace {

constexpr TensorType kType = TensorType::Q5_K;
const std::initializer_list<int> kF16 = {0, 2};  // d, dmin

TEST(Q5KOracle, ReferenceQuantizerIsGgmlsByteForByte) {
    EXPECT_EQ(quant::testing::quantizer_byte_difference(kType, make_values(kValues, 1), kRow, nullptr), -1);
    uint32_t seed = 10;
    for (quant::testing::Dist dist : quant::testing::kAllDists) {
        const auto x = quant::testing::random_values(dist, kValues / 4, seed++);
        EXPECT_EQ(quant::testing::quantizer_byte_difference(kType, x, kRow, nullptr), -1)
            << quant::testing::dist_name(dist);
    }
}

TEST(Q5KOracle, DequantizeIsBitIdenticalOnGgmlBlocks) {
    const auto x = make_values(kValues, 1);
    const auto imp = make_importance(2);
    std::vector<uint8_t> q(size_t(row_bytes(kType, kValues)));
    for (const float* im : {(const float*)nullptr, imp.data()}) {
        ggml().quantize_chunk(kType, x.data(), q.data(), kValues / kRow, kRow, im);
        expect_dequant_identical(kType, q);
    }
}

TEST(Q5KOracle, DequantizeIsBitIdenticalOnRandomBlocks) {
    expect_dequant_identical(kType, random_blocks(kType, kValues / 256, kF16, 3));
}

TEST(Q5KOracle, DotEqualsGgmlUpToSummationOrder) {
    const auto x = make_values(kValues, 4);
    std::vector<uint8_t> q(size_t(row_bytes(kType, kValues)));
    ggml().quantize_chunk(kType, x.data(), q.data(), kValues / kRow, kRow, nullptr);
    const double err_q = max_dot_error(kType, q, 5);
    const double err_r = max_dot_error(kType, random_blocks(kType, kValues / 256, kF16, 6), 7);
    // Integer parts are exact in both; the per-block float sums differ in order.
    EXPECT_LT(err_q, 5e-7);
    EXPECT_LT(err_r, 5e-7);
    std::printf("Q5_K dot max |ours-ggml|/sum|w a|: ggml blocks %.3g, random blocks %.3g\n", err_q, err_r);
}

// With importance ours is the scale-and-min fit Q4_K uses (kquant_fit.h), not ggml's imatrix
// quantizer: held to at most 1.02 x ggml's weighted RMSE, overall and per distribution.
TEST(Q5KOracle, ImportanceQuantizerNoWorseThanGgml) {
    const auto x = make_values(kValues, 8);
    const std::vector<float> ones(kRow, 1.f);
    const auto imp = make_importance(9);
    expect_quantizer_no_worse(kType, x, {{"none", nullptr}, {"ones", ones.data()}, {"x^2-like", imp.data()}}, kF16);
}

}  // namespace
}  // namespace ds4::kiq_test
