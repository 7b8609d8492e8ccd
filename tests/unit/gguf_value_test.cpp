// ds4::gguf::Value: constructors, the lenient numeric views, and the --inspect rendering.
#include <gtest/gtest.h>

#include <limits>

#include "common/error.h"
#include "gguf/value.h"

namespace ds4::gguf {
namespace {

TEST(GgufValue, ConstructorsSetTheGgufType) {
    EXPECT_EQ(Value::u8(1).type, ValueType::UINT8);
    EXPECT_EQ(Value::i16(1).type, ValueType::INT16);
    EXPECT_EQ(Value::f64(1).type, ValueType::FLOAT64);
    EXPECT_EQ(Value::boolean(true).type, ValueType::BOOL);
    const Value a = Value::array_str({"x", "y"});
    EXPECT_TRUE(a.is_array());
    EXPECT_EQ(a.elem_type, ValueType::STRING);
    EXPECT_EQ(a.elems.size(), 2u);
    EXPECT_THROW(Value::array(ValueType::ARRAY, {}), Error);
    EXPECT_THROW(Value::array(ValueType::UINT32, {int32_t(1)}), Error);  // i32 in a u32 array
    EXPECT_THROW(Value::array(ValueType(13), {}), Error);
}

TEST(GgufValue, LenientNumericViews) {
    EXPECT_EQ(Value::u8(200).as_int(), 200);
    EXPECT_EQ(Value::i32(-5).as_int(), -5);
    EXPECT_EQ(Value::i32(-5).as_uint(), std::nullopt);  // negative does not fit unsigned
    EXPECT_EQ(Value::u64(UINT64_MAX).as_uint(), UINT64_MAX);
    EXPECT_EQ(Value::u64(UINT64_MAX).as_int(), std::nullopt);  // does not fit i64
    EXPECT_EQ(Value::f32(1.0f).as_int(), std::nullopt);  // floats are not integers
    EXPECT_EQ(Value::boolean(true).as_int(), std::nullopt);
    EXPECT_EQ(Value::str("1").as_int(), std::nullopt);
    EXPECT_EQ(Value::i64(-3).as_double(), -3.0);
    EXPECT_EQ(Value::f32(0.25f).as_double(), 0.25);
    EXPECT_EQ(Value::str("x").as_double(), std::nullopt);
    EXPECT_EQ(*Value::str("abc").as_string(), "abc");
    EXPECT_EQ(Value::u8(1).as_string(), nullptr);
    const Value a = Value::array_i32({7, -7});
    EXPECT_EQ(a.as_int(), std::nullopt);  // arrays have no scalar view
    EXPECT_EQ(a.as_string(), nullptr);
    EXPECT_EQ(a.elem_int(1), -7);
    EXPECT_EQ(a.elem_double(0), 7.0);
    EXPECT_EQ(a.elem_int(2), std::nullopt);  // out of range
    EXPECT_EQ(Value::u8(1).elem_int(0), std::nullopt);
}

TEST(GgufValue, Rendering) {
    EXPECT_EQ(Value::u8(255).to_string(), "255");
    EXPECT_EQ(Value::i8(-128).to_string(), "-128");  // numbers, not characters
    EXPECT_EQ(Value::boolean(false).to_string(), "false");
    EXPECT_EQ(Value::f32(0.5f).to_string(), "0.5");
    EXPECT_EQ(Value::str("a\"b\\c\nd\x01").to_string(), "\"a\\\"b\\\\c\\nd\\x01\"");
    EXPECT_EQ(Value::str("\xe2\x9c\x93").to_string(), "\"\xe2\x9c\x93\"");  // UTF-8 kept
    EXPECT_EQ(Value::array_u32({1, 2, 3}).to_string(), "[1, 2, 3]");
    EXPECT_EQ(Value::array_u32({1, 2, 3}).to_string(2), "[1, 2, ... 1 more]");
    EXPECT_EQ(Value::array_u32({1, 2}).to_string(0), "[... 2 more]");
    EXPECT_EQ(Value::array_str({}).to_string(), "[]");
    // Long strings: cut at a character boundary, with the full length.
    std::string longs(252, 'a');
    longs += "\xe2\x9c\x93\xe2\x9c\x93" "bbbb";  // the 256-byte cut falls inside the 2nd mark
    EXPECT_EQ(Value::str(longs).to_string(),
              "\"" + std::string(252, 'a') + "\xe2\x9c\x93\"... (262 bytes)");
    EXPECT_EQ(Value::array_str({std::string(100, 'z')}).to_string(),
              "[\"" + std::string(48, 'z') + "\"... (100 bytes)]");
}

}  // namespace
}  // namespace ds4::gguf
