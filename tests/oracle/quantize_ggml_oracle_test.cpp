// ds4-quantize's quantizer (quantize/ggml_quantize.h) against the oracle's ggml_quantize_chunk:
// the same bytes for every type it claims exact, without and with an importance matrix, on
// rows of varied distributions (zero blocks and sub-blocks, outliers, tiny and huge values).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "quantize/ggml_quantize.h"
#include "support/kiq_oracle_checks.h"
#include "support/quant_oracle_util.h"

namespace ds4::kiq_test {
namespace {

using quant::testing::Dist;

// Index of the first differing byte as "block B byte O", or "" when equal.
std::string first_difference(TensorType t, const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    const int64_t i = quant::testing::first_byte_difference(a, b);
    if (i < 0) return "";
    const auto bytes = tensor_type_info(t)->block_bytes;
    return fmt::format("block {} byte {} (ours {:#x}, ggml {:#x})", i / bytes, i % bytes,
                       size_t(i) < a.size() ? a[size_t(i)] : 0, size_t(i) < b.size() ? b[size_t(i)] : 0);
}

void expect_same_bytes(TensorType t, const std::vector<float>& x, int64_t row, const float* imp,
                       const std::string& what) {
    const int64_t rows = int64_t(x.size()) / row;
    std::vector<uint8_t> ours(row_bytes(t, int64_t(x.size()))), theirs(ours.size());
    quantize::quantize_rows(t, x.data(), ours.data(), rows, row, imp);
    ASSERT_EQ(ggml().quantize_chunk(t, x.data(), theirs.data(), rows, row, imp), theirs.size());
    EXPECT_EQ(first_difference(t, ours, theirs), "") << tensor_type_name(t) << " " << what;
}

class QuantizeGgml : public ::testing::TestWithParam<TensorType> {};

TEST_P(QuantizeGgml, BytesEqualGgmlWithoutImportance) {
    const TensorType t = GetParam();
    ASSERT_TRUE(quantize::ggml_exact(t));
    expect_same_bytes(t, make_values(kValues / 4, 1), kRow, nullptr, "mixed rows");
    uint32_t seed = 20;
    for (Dist dist : quant::testing::kAllDists)
        expect_same_bytes(t, quant::testing::random_values(dist, 1 << 15, seed++), 2048, nullptr,
                          quant::testing::dist_name(dist));
}

TEST_P(QuantizeGgml, BytesEqualGgmlWithImportance) {
    const TensorType t = GetParam();
    const auto imp = make_importance(2);
    expect_same_bytes(t, make_values(kValues / 4, 3), kRow, imp.data(), "mixed rows, x^2-like");
    const std::vector<float> ones(kRow, 1.f);
    expect_same_bytes(t, make_values(kValues / 8, 4), kRow, ones.data(), "mixed rows, ones");
    uint32_t seed = 40;
    for (Dist dist : quant::testing::kAllDists)
        expect_same_bytes(t, quant::testing::random_values(dist, 1 << 15, seed++), kRow, imp.data(),
                          quant::testing::dist_name(dist));
}

// IQ2_XXS: ggml quantizes it only with importance weights (it aborts without).
TEST(QuantizeGgmlIq2xxs, BytesEqualGgmlWithImportance) {
    const TensorType t = TensorType::IQ2_XXS;
    ASSERT_TRUE(quantize::ggml_exact(t));
    const auto imp = make_importance(5);
    expect_same_bytes(t, make_values(kValues / 64, 6), kRow, imp.data(), "mixed rows, x^2-like");
    const std::vector<float> ones(kRow, 1.f);
    expect_same_bytes(t, make_values(kValues / 64, 7), kRow, ones.data(), "mixed rows, ones");
    uint32_t seed = 60;
    for (Dist dist : quant::testing::kAllDists)
        expect_same_bytes(t, quant::testing::random_values(dist, 1 << 13, seed++), kRow, imp.data(),
                          quant::testing::dist_name(dist));
}

INSTANTIATE_TEST_SUITE_P(Types, QuantizeGgml,
                         ::testing::Values(TensorType::Q8_0, TensorType::Q4_0, TensorType::Q2_K,
                                           TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K),
                         [](const auto& info) { return tensor_type_name(info.param); });

}  // namespace
}  // namespace ds4::kiq_test
