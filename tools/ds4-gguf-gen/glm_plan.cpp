// Presets and the resolution of command-line overrides into a GlmPlan.
#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "common/error.h"
#include "glm_gen.h"
#include "glm_vocab.h"
#include "quant/quant.h"

namespace ds4::gen {

using glm::GlmConfig;
using glm::TensorClass;

const std::vector<std::string>& glm_preset_names() {
    static const std::vector<std::string> names = {"tiny", "glm52"};
    return names;
}

namespace {

// tiny's indexer pattern: layer 0 and every odd layer full, so a shared layer follows a dense
// full layer (2) and a routed one (4): 1,1,0,1,0,...
std::vector<uint8_t> tiny_indexer_types(uint32_t n_layer) {
    std::vector<uint8_t> full(n_layer);
    for (uint32_t i = 0; i < n_layer; ++i) full[i] = i == 0 || i % 2 == 1;
    return full;
}

// tiny: every feature of the family (a dense lead layer, routed layers, full and shared
// indexer layers, top-k active after 8 tokens) in ~20 MB of F32. n_embd, ff and dense_ff are
// 256-multiples, so embd, output, dense_ffn, shared, exps, router and mtp_proj also take the
// 256-value K/IQ formats; attention and indexer rows (q_lora, nope, kv_lora: 64) are
// 32-multiples. The latent KV row (kv_lora 64 + rope 32 = 96) differs from the indexer's 64,
// which keeps llama.cpp from rotating the main KV by the indexer's Hadamard matrix.
GlmConfig tiny() {
    GlmConfig c;
    c.name = "ds4-gguf-gen glm tiny";
    c.n_embd = 256;
    c.n_vocab = 512;
    c.n_head = 4;
    c.q_lora_rank = 64;
    c.kv_lora_rank = 64;
    c.rope_dim = 32;
    c.qk_nope_dim = 64;
    c.v_head_dim = 64;
    c.indexer_heads = 2;
    c.indexer_dim = 64;
    c.indexer_top_k = 8;
    c.n_dense_lead = 1;
    c.dense_ff = 256;
    c.n_expert = 4;
    c.n_expert_used = 2;
    c.n_expert_shared = 1;
    c.expert_ff = 256;
    c.context_length = 4096;
    c.n_layer = 5;
    return c;
}

// The glm52 recipe, q2-style: quantized routed experts, Q8_0 elsewhere; indexer.proj and the
// router F32 as llama.cpp's converter and the published files keep them.
GlmTypes glm52_types() {
    GlmTypes t;
    t.fill(TensorType::Q8_0);
    t[size_t(TensorClass::IndexerProj)] = TensorType::F32;
    t[size_t(TensorClass::Router)] = TensorType::F32;
    t[size_t(TensorClass::GateUpExps)] = TensorType::Q2_K;
    t[size_t(TensorClass::DownExps)] = TensorType::Q4_K;
    return t;
}

template <class T, class U>
void apply(std::optional<T> o, U& field) {
    if (o) field = U(*o);
}

void parse_type(const std::string& spec, GlmTypes& types) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos) fail("--type {}: expected CLASS=TYPE (e.g. exps=q4_k)", spec);
    const std::string cls = spec.substr(0, eq), ty = spec.substr(eq + 1);
    const auto classes = glm::tensor_classes_from_name(cls);
    if (!classes)
        fail("--type {}: unknown class '{}' for glm-dsa (all, exps, embd, output, attn, indexer, dense_ffn, "
             "shared, gate_up_exps, down_exps, router, mtp_proj)",
             spec, cls);
    const auto t = tensor_type_from_name(ty);
    if (!t || !quant::is_weight_format(*t)) fail("--type {}: unknown or unsupported type '{}'", spec, ty);
    for (TensorClass c : *classes) types[size_t(c)] = *t;
}

void check_blocks(const GlmPlan& p) {
    std::vector<glm::TensorSpec> specs = glm::tensor_layout(p.cfg);
    if (p.cfg.n_nextn > 0)
        for (glm::TensorSpec& s : glm::mtp_layout(p.cfg)) specs.push_back(std::move(s));
    for (const glm::TensorSpec& s : specs) {
        const auto info = tensor_type_info(p.type_of(s.cls));
        if (s.ne[0] % info->block_values != 0)
            fail("type {} for class {}: tensor {} has rows of {} values, not a multiple of the {}-value block; "
                 "choose another type for that class (--type {}=...)",
                 info->name, glm::tensor_class_name(s.cls), s.name, s.ne[0], info->block_values,
                 glm::tensor_class_name(s.cls));
    }
}

}  // namespace

GlmPlan make_glm_plan(const std::string& preset, const GlmOverrides& ov, uint64_t seed, bool sparse, bool mtp) {
    GlmPlan p;
    p.preset = preset;
    p.seed = seed;
    p.sparse = sparse;
    p.threads = int(std::max(1u, std::thread::hardware_concurrency()));
    GlmConfig& c = p.cfg;
    if (preset == "tiny") {
        c = tiny();
        p.types.fill(TensorType::F32);
    } else if (preset == "glm52") {
        c = GlmConfig::glm52();
        c.name = "ds4-gguf-gen glm52";
        p.types = glm52_types();
    } else {
        fail("unknown glm-dsa preset '{}' (tiny, glm52)", preset);
    }

    uint32_t n_layer = c.n_layer;
    if (ov.layers) {
        if (*ov.layers == 0) fail("--layers must be >= 1");
        n_layer = *ov.layers;
    }
    if (ov.indexer_types) {
        if (ov.indexer_types->empty()) fail("--indexer-types: empty list");
        if (ov.layers && ov.indexer_types->size() != *ov.layers)
            fail("--indexer-types has {} entries but --layers is {}", ov.indexer_types->size(), *ov.layers);
        n_layer = uint32_t(ov.indexer_types->size());
    }
    apply(ov.embd, c.n_embd);
    apply(ov.vocab, c.n_vocab);
    apply(ov.heads, c.n_head);
    apply(ov.q_lora, c.q_lora_rank);
    apply(ov.kv_lora, c.kv_lora_rank);
    apply(ov.nope, c.qk_nope_dim);
    apply(ov.rope_dim, c.rope_dim);
    apply(ov.v_head, c.v_head_dim);
    apply(ov.experts, c.n_expert);
    apply(ov.experts_used, c.n_expert_used);
    apply(ov.shared_experts, c.n_expert_shared);
    apply(ov.ff, c.expert_ff);
    apply(ov.dense_ff, c.dense_ff);
    apply(ov.indexer_heads, c.indexer_heads);
    apply(ov.indexer_dim, c.indexer_dim);
    apply(ov.indexer_top_k, c.indexer_top_k);
    apply(ov.indexer_ln_eps, c.layer_norm_eps);
    apply(ov.ctx, c.context_length);
    // The layer pattern follows the final layer count and context: explicit, tiny's own, or
    // llama.cpp's default (GLM 5.2's table at a 1M context, all full below).
    c.n_layer = n_layer;
    if (ov.indexer_types)
        c.indexer_full = *ov.indexer_types;
    else if (preset == "tiny")
        c.indexer_full = tiny_indexer_types(n_layer);
    else
        c.indexer_full = GlmConfig::default_indexer_types(n_layer, c.context_length);
    c.n_dense_lead = std::min(c.n_dense_lead, n_layer);
    apply(ov.dense_lead, c.n_dense_lead);
    c.n_nextn = mtp ? 1 : 0;
    c.name += " seed " + std::to_string(seed);
    c.validate();
    if (c.n_vocab < kGlmVocabMinSize)
        fail("--vocab {} is too small for the glm4 tokenizer (at least {}: 256 bytes + {} ids for GLM's added "
             "tokens)",
             c.n_vocab, kGlmVocabMinSize, kGlmSpecialSlots);

    for (const std::string& t : ov.types) parse_type(t, p.types);
    check_blocks(p);
    return p;
}

std::vector<std::string> glm_oracle_warnings(const GlmConfig& c) {
    std::vector<std::string> out;
    const uint32_t d = c.indexer_dim;
    if (d < 64 || (d & (d - 1)) != 0)
        out.push_back(fmt::format("indexer_dim {} is not 64 x 2^k: llama.cpp has no Hadamard matrix of that size "
                                  "and cannot run this model",
                                  d));
    if (c.key_dim() == d)
        out.push_back(fmt::format("kv_lora + rope_dim = indexer_dim ({}): llama.cpp then also applies the "
                                  "indexer's Hadamard rotation to the main KV",
                                  d));
    return out;
}

}  // namespace ds4::gen
