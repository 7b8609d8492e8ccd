// Which storage type each tensor of a DeepSeek V4 file gets: upstream deepseek4-quantize's
// per-family flags (--experts, --routed-w1/w2/w3, --attention-proj, --attention, --shared,
// --embedding, --output, --dense) and --tensor-type PATTERN=TYPE overrides.
//
// Families, by GGUF name (every matrix of the V4 layout falls in exactly one):
//   routed w1 / w3 / w2   blk.N.ffn_gate_exps / ffn_up_exps / ffn_down_exps
//   shared                *_shexp
//   attention projection  attn_q_a, attn_q_b, attn_kv, attn_output_a, attn_output_b
//   attention             every other attention, indexer or compressor matrix
//   embedding / output    token_embd.weight / output.weight
//   dense                 every other matrix (hc_*_fn, output_hc_fn, ffn_gate_inp, MTP e/h proj)
//   fixed                 vectors (norms, sinks, biases, hc base/scale) and I32 tensors: never
//                         retyped, whatever the flags say (not even by --tensor-type)
// A family whose flag is not given keeps the input's type ("copy" / "template" say so
// explicitly). Overrides are tried first, in order; the first whose pattern matches wins.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gguf/tensor_type.h"

namespace ds4::quantize {

enum class Family : int {
    RoutedW1, RoutedW3, RoutedW2, Shared, AttentionProj, Attention, Embedding, Output, Dense, Fixed,
};
inline constexpr int kFamilyCount = 10;
std::string_view family_name(Family f);  // "routed_w1", ..., "fixed"

// The family of a tensor from its name, dimension count and type.
Family family_of(std::string_view name, uint32_t n_dims, TensorType type);

struct Recipe {
    // nullopt: keep the input's type. Not used for Fixed.
    std::array<std::optional<TensorType>, kFamilyCount> family{};
    // PATTERN=TYPE in command-line order. A pattern with '*' is a glob over the whole name
    // ('*' matches any run of characters); without one it matches the exact name or, as
    // upstream's, any name it is a prefix of. nullopt type: keep.
    std::vector<std::pair<std::string, std::optional<TensorType>>> overrides;
};

// A type flag's value: ggml's names in any case, '-' and '_' ignored ("Q4_K", "q4k",
// "iq2-xxs"), or "copy" / "template" (nullopt: keep). Only the engine's weight formats are
// accepted; anything else throws ds4::Error listing them.
std::optional<TensorType> parse_type(std::string_view s);
// "PATTERN=TYPE" -> override; throws ds4::Error for a malformed one.
std::pair<std::string, std::optional<TensorType>> parse_override(std::string_view s);
bool pattern_matches(std::string_view pattern, std::string_view name);

// The type a tensor is written in: `src` unless a rule names another.
TensorType choose_type(const Recipe& r, std::string_view name, uint32_t n_dims, TensorType src);

}  // namespace ds4::quantize
