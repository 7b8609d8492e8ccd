// Typed access to a model family's GGUF metadata keys ("<arch>.<suffix>"), with errors that name
// the file and the key ("model.gguf: metadata key 'glm-dsa.attention.head_count' missing").
// Family-neutral: each family's config reader (deepseek4/config.cpp, glm/config.cpp) reads its
// keys through one of these and keeps its own ranges and consistency rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "gguf/value.h"

namespace ds4::model {

class MetadataReader {
public:
    // `arch`: the key prefix, e.g. "deepseek4" (keys are "<arch>.<suffix>").
    MetadataReader(const gguf::File& f, std::string arch) : f_(f), arch_(std::move(arch)) {}

    std::string key(const char* suffix) const { return arch_ + "." + suffix; }
    const gguf::Value* find(const std::string& key) const { return f_.find(key); }
    bool has(const char* suffix) const { return f_.find(key(suffix)) != nullptr; }
    const gguf::Value& need(const std::string& key) const;

    [[noreturn]] void wrong(const std::string& key, const gguf::Value& v, const char* expected) const;
    [[noreturn]] void invalid(const std::string& key, const std::string& why) const;

    // general.architecture must be `arch`.
    void check_architecture() const;
    // An unsigned integer of any width that fits `max` (negative or wider: an error).
    uint64_t uint_of(const std::string& key, const gguf::Value& v, uint64_t max) const;
    uint32_t u32(const char* suffix) const;
    uint64_t u64(const char* suffix) const;  // u32 and u64 encodings
    // An optional unsigned key that must be absent or equal `only`.
    void absent_or(const char* suffix, uint64_t only, const char* why) const;
    float f32(const char* suffix) const;
    bool boolean(const char* suffix) const;
    // An array of at least min_len entries (one per layer).
    const gguf::Value& array(const std::string& key, const gguf::Value& v, size_t min_len, const char* elem_kind) const;
    std::vector<float> floats(const std::string& key, const gguf::Value& v, uint32_t n) const;
    // The first n entries of an integer or bool array, as integers.
    std::vector<int64_t> ints(const std::string& key, const gguf::Value& v, uint32_t n) const;

    static std::string describe(const gguf::Value& v);
    const gguf::File& file() const { return f_; }

private:
    const gguf::File& f_;
    std::string arch_;
};

}  // namespace ds4::model
