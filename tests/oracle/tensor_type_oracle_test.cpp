// Our block geometry table equals ggml's for every type both know.
#include <gtest/gtest.h>

#include "support/ggml_ref.h"

namespace ds4 {

TEST(TensorTypeOracle, BlockGeometryMatchesGgml) {
    const oracle::Ggml* g = oracle::Ggml::get();
    ASSERT_NE(g, nullptr) << oracle::Ggml::reason();
    int checked = 0;
    for (uint32_t id = 0; id < 40; ++id) {
        auto info = tensor_type_info(id);
        if (!info) continue;
        EXPECT_EQ(g->blck_size(TensorType(id)), int64_t(info->block_values)) << info->name;
        EXPECT_EQ(g->type_size(TensorType(id)), size_t(info->block_bytes)) << info->name;
        ++checked;
    }
    EXPECT_GE(checked, 30);
}

TEST(TensorTypeOracle, VecDotTypesAreTheOnesWeUse) {
    const oracle::Ggml* g = oracle::Ggml::get();
    ASSERT_NE(g, nullptr) << oracle::Ggml::reason();
    EXPECT_EQ(g->vec_dot_type(TensorType::Q8_0), TensorType::Q8_0);
    EXPECT_EQ(g->vec_dot_type(TensorType::MXFP4), TensorType::Q8_0);
    EXPECT_EQ(g->vec_dot_type(TensorType::Q4_0), TensorType::Q8_0);
    EXPECT_EQ(g->vec_dot_type(TensorType::Q5_K), TensorType::Q8_K);
    EXPECT_EQ(g->vec_dot_type(TensorType::Q6_K), TensorType::Q8_K);
    EXPECT_EQ(g->vec_dot_type(TensorType::Q2_K), TensorType::Q8_K);
    EXPECT_EQ(g->vec_dot_type(TensorType::Q4_K), TensorType::Q8_K);
    EXPECT_EQ(g->vec_dot_type(TensorType::IQ2_XXS), TensorType::Q8_K);
    EXPECT_EQ(g->vec_dot_type(TensorType::F16), TensorType::F16);
    EXPECT_EQ(g->vec_dot_type(TensorType::BF16), TensorType::BF16);
}

}  // namespace ds4
