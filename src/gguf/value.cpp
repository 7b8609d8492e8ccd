#include "gguf/value.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <type_traits>
#include <utility>

#include "common/error.h"

namespace ds4::gguf {

const char* value_type_name(ValueType t) {
    switch (t) {
        case ValueType::UINT8: return "u8";
        case ValueType::INT8: return "i8";
        case ValueType::UINT16: return "u16";
        case ValueType::INT16: return "i16";
        case ValueType::UINT32: return "u32";
        case ValueType::INT32: return "i32";
        case ValueType::FLOAT32: return "f32";
        case ValueType::BOOL: return "bool";
        case ValueType::STRING: return "string";
        case ValueType::ARRAY: return "array";
        case ValueType::UINT64: return "u64";
        case ValueType::INT64: return "i64";
        case ValueType::FLOAT64: return "f64";
    }
    return "unknown";
}

namespace {

Value scalar_value(ValueType t, Value::Scalar s) {
    Value v;
    v.type = t;
    v.scalar = std::move(s);
    return v;
}

// The variant alternative index equals the GGUF type number for every scalar type below
// ARRAY (9); u64/i64/f64 (10..12) sit at 9..11. Checked once here so a reordering of either
// enum cannot silently mislabel values.
constexpr size_t alternative_of(ValueType t) {
    const auto n = static_cast<size_t>(t);
    return n < 9 ? n : n - 1;
}
static_assert(alternative_of(ValueType::STRING) == 8);
static_assert(std::is_same_v<std::variant_alternative_t<alternative_of(ValueType::FLOAT64),
                                                        Value::Scalar>,
                             double>);
static_assert(std::is_same_v<std::variant_alternative_t<alternative_of(ValueType::UINT32),
                                                        Value::Scalar>,
                             uint32_t>);

std::optional<int64_t> scalar_int(const Value::Scalar& s) {
    return std::visit(
        [](const auto& x) -> std::optional<int64_t> {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, bool> || std::is_floating_point_v<T> ||
                          std::is_same_v<T, std::string>) {
                return std::nullopt;
            } else if constexpr (std::is_same_v<T, uint64_t>) {
                if (x > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
                return int64_t(x);
            } else {
                return int64_t(x);
            }
        },
        s);
}

std::optional<double> scalar_double(const Value::Scalar& s) {
    return std::visit(
        [](const auto& x) -> std::optional<double> {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::string>)
                return std::nullopt;
            else
                return double(x);
        },
        s);
}

std::string quoted(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += char(c);
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c < 0x20 || c == 0x7f) {
            out += fmt::format("\\x{:02x}", c);
        } else {
            out += char(c);  // UTF-8 bytes pass through
        }
    }
    return out + "\"";
}

// A string longer than max_bytes shows its first bytes (cut at a UTF-8 character boundary)
// and its length.
std::string abbreviated(const std::string& s, size_t max_bytes) {
    if (s.size() <= max_bytes) return quoted(s);
    size_t n = max_bytes;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return quoted(s.substr(0, n)) + fmt::format("... ({} bytes)", s.size());
}

std::string scalar_string(const Value::Scalar& s, size_t max_string_bytes) {
    return std::visit(
        [max_string_bytes](const auto& x) -> std::string {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::string>)
                return abbreviated(x, max_string_bytes);
            else if constexpr (std::is_same_v<T, bool>)
                return x ? "true" : "false";
            else if constexpr (std::is_same_v<T, uint8_t> || std::is_same_v<T, int8_t>)
                return fmt::format("{}", int(x));
            else
                return fmt::format("{}", x);
        },
        s);
}

}  // namespace

Value Value::u8(uint8_t v) { return scalar_value(ValueType::UINT8, v); }
Value Value::i8(int8_t v) { return scalar_value(ValueType::INT8, v); }
Value Value::u16(uint16_t v) { return scalar_value(ValueType::UINT16, v); }
Value Value::i16(int16_t v) { return scalar_value(ValueType::INT16, v); }
Value Value::u32(uint32_t v) { return scalar_value(ValueType::UINT32, v); }
Value Value::i32(int32_t v) { return scalar_value(ValueType::INT32, v); }
Value Value::f32(float v) { return scalar_value(ValueType::FLOAT32, v); }
Value Value::boolean(bool v) { return scalar_value(ValueType::BOOL, v); }
Value Value::str(std::string v) { return scalar_value(ValueType::STRING, std::move(v)); }
Value Value::u64(uint64_t v) { return scalar_value(ValueType::UINT64, v); }
Value Value::i64(int64_t v) { return scalar_value(ValueType::INT64, v); }
Value Value::f64(double v) { return scalar_value(ValueType::FLOAT64, v); }

Value Value::array(ValueType elem_type, std::vector<Scalar> elems) {
    if (elem_type == ValueType::ARRAY || static_cast<uint32_t>(elem_type) > 12)
        fail("GGUF array element type {} is not a scalar type", static_cast<uint32_t>(elem_type));
    const size_t want = alternative_of(elem_type);
    for (size_t i = 0; i < elems.size(); ++i)
        if (elems[i].index() != want)
            fail("GGUF array of {}: element {} holds another type", value_type_name(elem_type),
                 i);
    Value v;
    v.type = ValueType::ARRAY;
    v.elem_type = elem_type;
    v.elems = std::move(elems);
    return v;
}

Value Value::array_str(const std::vector<std::string>& v) {
    return array(ValueType::STRING, std::vector<Scalar>(v.begin(), v.end()));
}
Value Value::array_i32(const std::vector<int32_t>& v) {
    return array(ValueType::INT32, std::vector<Scalar>(v.begin(), v.end()));
}
Value Value::array_u32(const std::vector<uint32_t>& v) {
    return array(ValueType::UINT32, std::vector<Scalar>(v.begin(), v.end()));
}
Value Value::array_f32(const std::vector<float>& v) {
    return array(ValueType::FLOAT32, std::vector<Scalar>(v.begin(), v.end()));
}

std::optional<int64_t> Value::as_int() const {
    if (is_array()) return std::nullopt;
    return scalar_int(scalar);
}

std::optional<uint64_t> Value::as_uint() const {
    if (is_array()) return std::nullopt;
    if (const auto* u = std::get_if<uint64_t>(&scalar)) return *u;
    auto i = scalar_int(scalar);
    if (!i || *i < 0) return std::nullopt;
    return uint64_t(*i);
}

std::optional<double> Value::as_double() const {
    if (is_array()) return std::nullopt;
    return scalar_double(scalar);
}

const std::string* Value::as_string() const {
    if (is_array()) return nullptr;
    return std::get_if<std::string>(&scalar);
}

std::optional<int64_t> Value::elem_int(size_t i) const {
    if (!is_array() || i >= elems.size()) return std::nullopt;
    return scalar_int(elems[i]);
}

std::optional<double> Value::elem_double(size_t i) const {
    if (!is_array() || i >= elems.size()) return std::nullopt;
    return scalar_double(elems[i]);
}

std::string Value::to_string(size_t max_elems) const {
    // A chat template can be kilobytes long; one line of a summary should stay readable.
    if (!is_array()) return scalar_string(scalar, 256);
    std::string out = "[";
    const size_t shown = std::min(elems.size(), max_elems);
    for (size_t i = 0; i < shown; ++i) {
        if (i) out += ", ";
        out += scalar_string(elems[i], 48);
    }
    if (shown < elems.size())
        out += fmt::format("{}... {} more", shown ? ", " : "", elems.size() - shown);
    return out + "]";
}

}  // namespace ds4::gguf
