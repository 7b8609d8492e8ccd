#include "model/metadata_reader.h"

#include <fmt/format.h>

#include <limits>

#include "common/error.h"

namespace ds4::model {

using gguf::Value;
using gguf::ValueType;

const Value& MetadataReader::need(const std::string& key) const {
    const Value* v = f_.find(key);
    if (!v) fail("{}: metadata key '{}' missing", f_.path(), key);
    return *v;
}

void MetadataReader::wrong(const std::string& key, const Value& v, const char* expected) const {
    fail("{}: metadata key '{}' has type {}, expected {}", f_.path(), key, describe(v), expected);
}

void MetadataReader::invalid(const std::string& key, const std::string& why) const {
    fail("{}: metadata key '{}' {}", f_.path(), key, why);
}

void MetadataReader::check_architecture() const {
    const Value& arch = need("general.architecture");
    const std::string* s = arch.as_string();
    if (!s) wrong("general.architecture", arch, "string");
    // to_string() quotes and escapes: a hostile name must not break the one-line message.
    if (*s != arch_) invalid("general.architecture", fmt::format("is {}, expected \"{}\"", arch.to_string(), arch_));
}

uint64_t MetadataReader::uint_of(const std::string& key, const Value& v, uint64_t max) const {
    auto u = v.as_uint();
    if (!u) {
        if (v.as_int()) invalid(key, fmt::format("is negative ({})", v.to_string()));
        wrong(key, v, "an unsigned integer (u32)");
    }
    if (*u > max) invalid(key, fmt::format("value {} is out of range (max {})", *u, max));
    return *u;
}

uint32_t MetadataReader::u32(const char* suffix) const {
    const std::string k = key(suffix);
    return uint32_t(uint_of(k, need(k), std::numeric_limits<uint32_t>::max()));
}

uint64_t MetadataReader::u64(const char* suffix) const {
    const std::string k = key(suffix);
    return uint_of(k, need(k), std::numeric_limits<uint64_t>::max());
}

void MetadataReader::absent_or(const char* suffix, uint64_t only, const char* why) const {
    const std::string k = key(suffix);
    if (const Value* v = find(k)) {
        const uint64_t got = uint_of(k, *v, std::numeric_limits<uint64_t>::max());
        if (got != only) invalid(k, fmt::format("is {}; {}", got, why));
    }
}

float MetadataReader::f32(const char* suffix) const {
    const std::string k = key(suffix);
    const Value& v = need(k);
    auto d = v.as_double();
    if (!d) wrong(k, v, "a number (f32)");
    return float(*d);
}

bool MetadataReader::boolean(const char* suffix) const {
    const std::string k = key(suffix);
    const Value& v = need(k);
    if (v.is_array() || v.type != ValueType::BOOL) wrong(k, v, "bool");
    return std::get<bool>(v.scalar);
}

const Value& MetadataReader::array(const std::string& key, const Value& v, size_t min_len,
                                   const char* elem_kind) const {
    if (!v.is_array()) wrong(key, v, elem_kind);
    if (v.elems.size() < min_len)
        invalid(key, fmt::format("has {} entries, expected at least {} (one per layer)", v.elems.size(), min_len));
    return v;
}

std::vector<float> MetadataReader::floats(const std::string& key, const Value& v, uint32_t n) const {
    array(key, v, n, "an array of f32");
    std::vector<float> out(n);
    for (uint32_t i = 0; i < n; ++i) {
        auto e = v.elem_double(i);
        if (!e) wrong(key, v, "an array of f32");
        out[i] = float(*e);
    }
    return out;
}

std::vector<int64_t> MetadataReader::ints(const std::string& key, const Value& v, uint32_t n) const {
    array(key, v, n, "an array of integers or bools");
    std::vector<int64_t> out(n);
    for (uint32_t i = 0; i < n; ++i) {
        if (v.elem_type == ValueType::BOOL) {
            out[i] = std::get<bool>(v.elems[i]) ? 1 : 0;
            continue;
        }
        auto e = v.elem_int(i);
        if (!e) wrong(key, v, "an array of integers or bools");
        out[i] = *e;
    }
    return out;
}

std::string MetadataReader::describe(const Value& v) {
    if (v.is_array()) return fmt::format("array of {}", gguf::value_type_name(v.elem_type));
    return gguf::value_type_name(v.type);
}

}  // namespace ds4::model
