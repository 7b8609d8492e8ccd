#include "quantize/recipe.h"

#include <cctype>

#include "common/error.h"
#include "quant/quant.h"

namespace ds4::quantize {
namespace {

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }

std::string squash(std::string_view s) {
    std::string out;
    for (char c : s)
        if (c != '-' && c != '_') out += char(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// Glob with '*' only; iterative with one backtrack point (linear for the usual patterns).
bool glob(std::string_view p, std::string_view s) {
    size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
    while (si < s.size()) {
        if (pi < p.size() && p[pi] == '*') {
            star = pi++, mark = si;
        } else if (pi < p.size() && p[pi] == s[si]) {
            ++pi, ++si;
        } else if (star != std::string_view::npos) {
            pi = star + 1, si = ++mark;
        } else {
            return false;
        }
    }
    while (pi < p.size() && p[pi] == '*') ++pi;
    return pi == p.size();
}

}  // namespace

std::string_view family_name(Family f) {
    static constexpr std::string_view kNames[kFamilyCount] = {
        "routed_w1", "routed_w3", "routed_w2", "shared", "attention_proj",
        "attention", "embedding", "output",    "dense",  "fixed"};
    return kNames[int(f)];
}

Family family_of(std::string_view name, uint32_t n_dims, TensorType type) {
    const bool float_like = type == TensorType::F32 || type == TensorType::F16 || type == TensorType::BF16;
    if (n_dims <= 1 || (!float_like && !quant::is_weight_format(type))) return Family::Fixed;
    if (contains(name, "ffn_gate_exps")) return Family::RoutedW1;
    if (contains(name, "ffn_up_exps")) return Family::RoutedW3;
    if (contains(name, "ffn_down_exps")) return Family::RoutedW2;
    if (name == "token_embd.weight") return Family::Embedding;
    if (name == "output.weight") return Family::Output;
    if (contains(name, "_shexp")) return Family::Shared;
    for (std::string_view p : {".attn_q_a.", ".attn_q_b.", ".attn_kv.", ".attn_output_a.", ".attn_output_b."})
        if (contains(name, p) && !contains(name, "indexer")) return Family::AttentionProj;
    if (contains(name, "attn") || contains(name, "indexer") || contains(name, "compressor"))
        return Family::Attention;
    return Family::Dense;
}

std::optional<TensorType> parse_type(std::string_view s) {
    const std::string want = squash(s);
    if (want == "copy" || want == "template") return std::nullopt;
    for (uint32_t id = 0; id < 64; ++id) {
        const auto info = tensor_type_info(id);
        if (!info || squash(info->name) != want) continue;
        const TensorType t = TensorType(id);
        if (quant::is_weight_format(t)) return t;
    }
    fail("unknown or unsupported type '{}': expected one of {} (or copy)", s, quant::weight_format_names());
}

std::pair<std::string, std::optional<TensorType>> parse_override(std::string_view s) {
    const size_t eq = s.rfind('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == s.size())
        fail("--tensor-type '{}': expected PATTERN=TYPE", s);
    return {std::string(s.substr(0, eq)), parse_type(s.substr(eq + 1))};
}

bool pattern_matches(std::string_view pattern, std::string_view name) {
    if (contains(pattern, "*")) return glob(pattern, name);
    return name.substr(0, pattern.size()) == pattern;
}

TensorType choose_type(const Recipe& r, std::string_view name, uint32_t n_dims, TensorType src) {
    const Family f = family_of(name, n_dims, src);
    if (f == Family::Fixed) return src;
    for (const auto& [pattern, type] : r.overrides)
        if (pattern_matches(pattern, name)) return type.value_or(src);
    return r.family[size_t(f)].value_or(src);
}

}  // namespace ds4::quantize
