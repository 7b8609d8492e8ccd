// A GGUF metadata value: one of the 13 GGUF value types, or an array of one of them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace ds4::gguf {

// Numbering of the GGUF spec (gguf_type).
enum class ValueType : uint32_t {
    UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5, FLOAT32 = 6,
    BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* value_type_name(ValueType t);

// Scalars keep their exact GGUF type. An array holds its element type and its elements,
// each stored in the scalar alternative of that type (arrays of arrays are rejected).
struct Value {
    using Scalar = std::variant<uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, float,
                                bool, std::string, uint64_t, int64_t, double>;
    ValueType type = ValueType::UINT32;
    Scalar scalar;
    ValueType elem_type = ValueType::UINT8;  // only for ARRAY
    std::vector<Scalar> elems;               // only for ARRAY

    // Constructors for each GGUF type; a C++ type maps to exactly one GGUF type.
    static Value u8(uint8_t v), i8(int8_t v), u16(uint16_t v), i16(int16_t v), u32(uint32_t v),
        i32(int32_t v), f32(float v), boolean(bool v), str(std::string v), u64(uint64_t v),
        i64(int64_t v), f64(double v);
    static Value array(ValueType elem_type, std::vector<Scalar> elems);
    static Value array_str(const std::vector<std::string>& v);
    static Value array_i32(const std::vector<int32_t>& v);
    static Value array_u32(const std::vector<uint32_t>& v);
    static Value array_f32(const std::vector<float>& v);

    bool is_array() const { return type == ValueType::ARRAY; }
    // Lenient numeric views: any integer type that fits, for as_int/as_uint; any numeric type
    // for as_double. nullopt when the value is not numeric or does not fit.
    std::optional<int64_t> as_int() const;
    std::optional<uint64_t> as_uint() const;
    std::optional<double> as_double() const;
    const std::string* as_string() const;
    // Element i of an array through the same lenient views.
    std::optional<int64_t> elem_int(size_t i) const;
    std::optional<double> elem_double(size_t i) const;
    // Human-readable rendering for --inspect: strings quoted and escaped; arrays beyond
    // max_elems elements and strings beyond 256 bytes (48 inside arrays) are abbreviated.
    std::string to_string(size_t max_elems = 8) const;
};

}  // namespace ds4::gguf
