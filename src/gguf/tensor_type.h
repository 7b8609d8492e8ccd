// Tensor element types as numbered in GGUF files (ggml's enum ggml_type), and their block
// geometry. The numbering and sizes are format facts; tests check them against libggml-base.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ds4 {

enum class TensorType : uint32_t {
    F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
    Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
    IQ2_XXS = 16, IQ2_XS = 17, IQ3_XXS = 18, IQ1_S = 19, IQ4_NL = 20, IQ3_S = 21, IQ2_S = 22,
    IQ4_XS = 23, I8 = 24, I16 = 25, I32 = 26, I64 = 27, F64 = 28, IQ1_M = 29, BF16 = 30,
    TQ1_0 = 34, TQ2_0 = 35, MXFP4 = 39,
};

struct TensorTypeInfo {
    std::string_view name;   // ggml's name, e.g. "q8_0"
    uint32_t block_values;   // values per block (1 for plain types)
    uint32_t block_bytes;    // bytes per block
};

// Geometry of a known type; nullopt for ids this engine does not know (never guessed).
std::optional<TensorTypeInfo> tensor_type_info(uint32_t type_id);
inline std::optional<TensorTypeInfo> tensor_type_info(TensorType t) {
    return tensor_type_info(static_cast<uint32_t>(t));
}
// "q8_0", or "type#N" for an unknown id.
std::string tensor_type_name(uint32_t type_id);
inline std::string tensor_type_name(TensorType t) { return tensor_type_name(uint32_t(t)); }
// Parses ggml's lower-case name ("iq2_xxs", "f16"); nullopt if unknown.
std::optional<TensorType> tensor_type_from_name(std::string_view name);

// Bytes of one row of n values; throws ds4::Error if n is not a multiple of the block size.
size_t row_bytes(TensorType t, int64_t n);

}  // namespace ds4
