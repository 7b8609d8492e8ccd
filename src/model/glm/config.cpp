#include "model/glm/config.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <optional>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/metadata_reader.h"

namespace ds4::glm {

using gguf::Value;
using gguf::ValueType;

std::string arch_key(const char* suffix) { return std::string(kArchitecture) + "." + suffix; }

GlmConfig GlmConfig::glm52() {
    GlmConfig c;
    c.set_layer_count(78);
    return c;
}

std::vector<uint8_t> GlmConfig::default_indexer_types(uint32_t n_layer, uint64_t context_length) {
    std::vector<uint8_t> full(n_layer, 1);
    if (context_length < (uint64_t(1) << 20)) return full;  // GLM 5 / 5.1: every layer full
    // GLM 5.2's table (78 entries): 1, 1, then 1, 0, 0, 0 repeated; past it 0.
    for (uint32_t i = 0; i < n_layer; ++i) full[i] = i < 78 && (i < 2 || (i - 2) % 4 == 0) ? 1 : 0;
    return full;
}

void GlmConfig::set_layer_count(uint32_t n) {
    n_layer = n;
    indexer_full = default_indexer_types(n, context_length);
}

uint32_t GlmConfig::indexer_source(uint32_t layer) const {
    for (uint32_t il = layer + 1; il-- > 0;)
        if (indexer_full.at(il)) return il;
    fail("internal: layer {} has no full indexer layer at or before it", layer);
}

namespace {

[[noreturn]] void bad(const char* suffix, const std::string& why) {
    fail("model config: {} {}", arch_key(suffix), why);
}

void in_range(const char* suffix, uint64_t v, uint64_t lo, uint64_t hi) {
    if (v < lo || v > hi) bad(suffix, fmt::format("is {}, expected {} to {}", v, lo, hi));
}

void positive_finite(const char* suffix, float v) {
    if (!std::isfinite(v) || v <= 0.0f) bad(suffix, fmt::format("must be finite and > 0, got {}", v));
}

}  // namespace

void GlmConfig::validate() const {
    in_range("block_count", n_layer, 1, kMaxLayers);
    in_range("nextn_predict_layers", n_nextn, 0, 1);
    in_range("embedding_length", n_embd, 1, 65536);
    in_range("vocab_size", n_vocab, 1, 1u << 24);
    in_range("attention.head_count", n_head, 1, 4096);
    in_range("attention.q_lora_rank", q_lora_rank, 1, 65536);
    in_range("attention.kv_lora_rank", kv_lora_rank, 1, 65536);
    if (rope_dim == 0 || rope_dim % 2 != 0 || rope_dim > 4096)
        bad("rope.dimension_count", fmt::format("must be even and in [2, 4096], got {}", rope_dim));
    in_range("attention.key_length_mla", uint64_t(qk_nope_dim) + rope_dim, uint64_t(rope_dim) + 1,
             16384 + uint64_t(rope_dim));
    in_range("attention.value_length_mla", v_head_dim, 1, 16384);
    positive_finite("attention.layer_norm_rms_epsilon", norm_eps);
    if (!std::isfinite(layer_norm_eps) || layer_norm_eps < 0.0f)
        bad("attention.layer_norm_epsilon", fmt::format("must be finite and >= 0, got {}", layer_norm_eps));
    in_range("attention.indexer.head_count", indexer_heads, 1, 4096);
    if (indexer_dim < rope_dim || indexer_dim > 16384)
        bad("attention.indexer.key_length",
            fmt::format("must be >= rope dims {} and <= 16384, got {}", rope_dim, indexer_dim));
    in_range("attention.indexer.top_k", indexer_top_k, 1, 1u << 20);
    in_range("leading_dense_block_count", n_dense_lead, 0, n_layer);
    in_range("feed_forward_length", dense_ff, 1, 1u << 18);
    in_range("expert_count", n_expert, 1, 65536);
    if (n_expert_used == 0 || n_expert_used > n_expert)
        bad("expert_used_count", fmt::format("must be in [1, expert_count {}], got {}", n_expert, n_expert_used));
    in_range("expert_shared_count", n_expert_shared, 1, 64);
    in_range("expert_feed_forward_length", expert_ff, 1, 1u << 18);
    if (!std::isfinite(expert_weights_scale)) bad("expert_weights_scale", "must be finite");
    positive_finite("rope.freq_base", rope_base);
    in_range("context_length", context_length, 1, uint64_t(1) << 40);
    // Products that size tensors stay far from overflow.
    if (uint64_t(n_head) * (q_head_dim()) > (1u << 24) || uint64_t(n_head) * kv_lora_rank > (1u << 24) ||
        uint64_t(n_head) * v_head_dim > (1u << 24) || uint64_t(indexer_heads) * indexer_dim > (1u << 24) ||
        uint64_t(expert_ff) * n_expert_shared > (1u << 24))
        bad("attention.head_count", "dimensions are implausibly large");
    if (indexer_full.size() != n_layer)
        bad("attention.indexer.types", fmt::format("has {} entries for {} layers", indexer_full.size(), n_layer));
    if (!indexer_full[0])
        bad("attention.indexer.types", "entry 0 is shared; the first layer must compute its own top-k");
}

std::vector<std::pair<std::string, Value>> GlmConfig::metadata() const {
    std::vector<std::pair<std::string, Value>> kv;
    auto put = [&](std::string key, Value v) { kv.emplace_back(std::move(key), std::move(v)); };
    auto u32 = [&](const char* s, uint32_t v) { put(arch_key(s), Value::u32(v)); };
    auto f32 = [&](const char* s, float v) { put(arch_key(s), Value::f32(v)); };

    put("general.architecture", Value::str(kArchitecture));
    put("general.name", Value::str(name));
    u32("block_count", n_layer + n_nextn);
    if (n_nextn > 0) u32("nextn_predict_layers", n_nextn);
    if (context_length <= std::numeric_limits<uint32_t>::max())
        u32("context_length", uint32_t(context_length));
    else
        put(arch_key("context_length"), Value::u64(context_length));
    u32("embedding_length", n_embd);
    u32("feed_forward_length", dense_ff);
    u32("vocab_size", n_vocab);
    u32("attention.head_count", n_head);
    u32("attention.head_count_kv", 1);
    // llama.cpp's MLA convention: key/value_length are the absorbed (latent) widths,
    // *_mla the per-head widths before absorption.
    u32("attention.key_length", key_dim());
    u32("attention.value_length", value_dim());
    u32("attention.key_length_mla", q_head_dim());
    u32("attention.value_length_mla", v_head_dim);
    u32("attention.q_lora_rank", q_lora_rank);
    u32("attention.kv_lora_rank", kv_lora_rank);
    f32("attention.layer_norm_rms_epsilon", norm_eps);
    f32("attention.layer_norm_epsilon", layer_norm_eps);
    u32("attention.indexer.head_count", indexer_heads);
    u32("attention.indexer.key_length", indexer_dim);
    u32("attention.indexer.top_k", indexer_top_k);
    {
        std::vector<gguf::Value::Scalar> types;
        for (uint8_t f : indexer_full) types.emplace_back(bool(f));
        put(arch_key("attention.indexer.types"), Value::array(ValueType::BOOL, std::move(types)));
    }
    u32("rope.dimension_count", rope_dim);
    f32("rope.freq_base", rope_base);
    u32("leading_dense_block_count", n_dense_lead);
    u32("expert_count", n_expert);
    u32("expert_used_count", n_expert_used);
    u32("expert_shared_count", n_expert_shared);
    u32("expert_feed_forward_length", expert_ff);
    f32("expert_weights_scale", expert_weights_scale);
    put(arch_key("expert_weights_norm"), Value::boolean(expert_weights_norm));
    u32("expert_gating_func", kGatingSigmoid);
    return kv;
}

void GlmConfig::write_metadata(gguf::Writer& w) const {
    validate();
    for (auto& [k, v] : metadata()) w.set(k, v);
}

namespace {

// The vocabulary size: vocab_size, or the token list's length (llama.cpp's fallback).
uint32_t read_vocab(const model::MetadataReader& r) {
    if (r.has("vocab_size")) return r.u32("vocab_size");
    const Value* toks = r.find("tokenizer.ggml.tokens");
    if (!toks || !toks->is_array())
        r.invalid(r.key("vocab_size"), "missing, and no tokenizer.ggml.tokens array to count");
    return uint32_t(std::min<size_t>(toks->elems.size(), std::numeric_limits<uint32_t>::max()));
}

// Keys that must agree with the MLA shape (llama.cpp derives the cache from them).
void check_mla_keys(const model::MetadataReader& r, const GlmConfig& c) {
    if (r.has("attention.head_count_kv") && r.u32("attention.head_count_kv") != 1)
        r.invalid(r.key("attention.head_count_kv"), "must be 1 (absorbed MLA: one latent KV row per token)");
    if (r.has("attention.key_length") && r.u32("attention.key_length") != c.key_dim())
        r.invalid(r.key("attention.key_length"),
                  fmt::format("is {}, must be kv_lora_rank + rope dims = {}", r.u32("attention.key_length"),
                              c.key_dim()));
    if (r.has("attention.value_length") && r.u32("attention.value_length") != c.value_dim())
        r.invalid(r.key("attention.value_length"),
                  fmt::format("is {}, must be kv_lora_rank = {}", r.u32("attention.value_length"), c.value_dim()));
    if (const Value* t = r.find(r.key("rope.scaling.type"))) {
        const std::string* s = t->as_string();
        if (!s) r.wrong(r.key("rope.scaling.type"), *t, "string");
        if (*s != "none")
            r.invalid(r.key("rope.scaling.type"), fmt::format("is \"{}\"; GLM 5 uses RoPE without scaling", *s));
    }
    r.absent_or("expert_group_count", 1, "group-limited routing is not part of this model");
    r.absent_or("expert_gating_func", kGatingSigmoid, "only 2 (sigmoid scoring) is supported");
}

}  // namespace

GlmConfig GlmConfig::from_gguf(const gguf::File& f) {
    model::MetadataReader r(f, kArchitecture);
    r.check_architecture();
    GlmConfig c;
    if (const Value* n = f.find("general.name"); n && n->as_string()) c.name = *n->as_string();
    const uint32_t blocks = r.u32("block_count");
    c.n_nextn = r.has("nextn_predict_layers") ? r.u32("nextn_predict_layers") : 0;
    if (c.n_nextn >= blocks)
        r.invalid(r.key("nextn_predict_layers"),
                  fmt::format("is {}, must be below block_count {} (the trunk needs a layer)", c.n_nextn, blocks));
    c.n_layer = blocks - c.n_nextn;
    if (c.n_layer > kMaxLayers)
        r.invalid(r.key("block_count"), fmt::format("leaves {} trunk layers, expected 1 to {}", c.n_layer, kMaxLayers));
    c.context_length = r.u64("context_length");
    c.n_embd = r.u32("embedding_length");
    c.dense_ff = r.has("feed_forward_length") ? r.u32("feed_forward_length") : c.dense_ff;
    c.n_vocab = read_vocab(r);
    c.n_head = r.u32("attention.head_count");
    c.q_lora_rank = r.u32("attention.q_lora_rank");
    c.kv_lora_rank = r.u32("attention.kv_lora_rank");
    c.rope_dim = r.u32("rope.dimension_count");
    const uint32_t k_mla = r.u32("attention.key_length_mla");
    if (k_mla <= c.rope_dim)
        r.invalid(r.key("attention.key_length_mla"),
                  fmt::format("is {}, must exceed rope.dimension_count {}", k_mla, c.rope_dim));
    c.qk_nope_dim = k_mla - c.rope_dim;
    c.v_head_dim = r.u32("attention.value_length_mla");
    c.norm_eps = r.f32("attention.layer_norm_rms_epsilon");
    if (r.has("attention.layer_norm_epsilon")) c.layer_norm_eps = r.f32("attention.layer_norm_epsilon");
    c.indexer_heads = r.u32("attention.indexer.head_count");
    c.indexer_dim = r.u32("attention.indexer.key_length");
    c.indexer_top_k = r.u32("attention.indexer.top_k");
    c.n_dense_lead = r.has("leading_dense_block_count") ? r.u32("leading_dense_block_count") : 0;
    c.n_expert = r.u32("expert_count");
    c.n_expert_used = r.u32("expert_used_count");
    c.n_expert_shared = r.u32("expert_shared_count");
    c.expert_ff = r.u32("expert_feed_forward_length");
    c.expert_weights_scale = r.has("expert_weights_scale") ? r.f32("expert_weights_scale") : 1.0f;
    c.expert_weights_norm = r.has("expert_weights_norm") ? r.boolean("expert_weights_norm") : false;
    c.rope_base = r.f32("rope.freq_base");
    if (c.n_layer == 0) r.invalid(r.key("block_count"), "leaves no trunk layer");
    if (const Value* t = r.find(r.key("attention.indexer.types")); t && !t->is_array()) {
        // One value for every layer (llama.cpp accepts a scalar too).
        const auto b = t->type == ValueType::BOOL ? std::optional<int64_t>(std::get<bool>(t->scalar)) : t->as_int();
        if (!b) r.wrong(r.key("attention.indexer.types"), *t, "a bool array (one per layer)");
        c.indexer_full.assign(c.n_layer, *b != 0);
    } else if (t) {
        const std::vector<int64_t> v = r.ints(r.key("attention.indexer.types"), *t, c.n_layer);
        c.indexer_full.resize(c.n_layer);
        for (uint32_t i = 0; i < c.n_layer; ++i) c.indexer_full[i] = v[i] != 0;
    } else {
        c.indexer_full = default_indexer_types(c.n_layer, c.context_length);
    }
    try {
        c.validate();
    } catch (const Error& e) {
        fail("{}: {}", f.path(), e.what());
    }
    // After the ranges, so a bad kv_lora_rank or rope count is reported under its own key.
    check_mla_keys(r, c);
    return c;
}

}  // namespace ds4::glm
