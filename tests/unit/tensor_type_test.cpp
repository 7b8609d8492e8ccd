#include "gguf/tensor_type.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace ds4 {

TEST(TensorType, RowBytesOfBlockFormats) {
    EXPECT_EQ(row_bytes(TensorType::Q8_0, 64), 68u);
    EXPECT_EQ(row_bytes(TensorType::IQ2_XXS, 4096), 16u * 66u);
    EXPECT_EQ(row_bytes(TensorType::F16, 3), 6u);
    EXPECT_THROW(row_bytes(TensorType::Q2_K, 100), Error);  // not a multiple of 256
}

TEST(TensorType, NamesRoundTrip) {
    for (uint32_t id = 0; id < 64; ++id) {
        auto info = tensor_type_info(id);
        if (!info) {
            EXPECT_EQ(tensor_type_name(id), "type#" + std::to_string(id));
            continue;
        }
        auto back = tensor_type_from_name(info->name);
        ASSERT_TRUE(back.has_value()) << info->name;
        EXPECT_EQ(uint32_t(*back), id);
    }
    EXPECT_EQ(tensor_type_from_name("IQ2_XXS"), TensorType::IQ2_XXS);
    EXPECT_FALSE(tensor_type_from_name("q9_9").has_value());
}

}  // namespace ds4
