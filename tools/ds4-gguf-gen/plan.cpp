// Presets and the resolution of command-line overrides into a GenPlan.
#include <algorithm>
#include <thread>

#include "common/error.h"
#include "options.h"
#include "quant/quant.h"
#include "vocab.h"

namespace ds4::gen {

using deepseek4::ModelConfig;
using deepseek4::TensorClass;
using deepseek4::TypeRecipe;

const std::vector<std::string>& preset_names() {
    static const std::vector<std::string> names = {"tiny", "small", "flash", "pro"};
    return names;
}

namespace {

// tiny: every feature (hash + biased routing, ratios 0/4/128, indexer top-k active after 20
// tokens) in a few tens of MB of F32. n_embd and ff are 256-multiples so embd, output, hc,
// router, shared and expert tensors also take the 256-value K/IQ formats; the rest have
// 32-multiple rows (q8_0/mxfp4 work everywhere). head_dim 96 != indexer_dim 64 avoids
// llama.cpp applying the indexer's Hadamard rotation to the main KV (spec/ORACLE.md), and
// indexer_dim >= 64 is the smallest Hadamard size llama.cpp builds.
ModelConfig tiny() {
    ModelConfig c;
    c.name = "ds4-gguf-gen tiny";
    c.set_layer_count(6);  // ratios 0,0,4,128,4,128
    c.n_embd = 256;
    c.n_vocab = 512;
    c.n_head = 4;
    c.head_dim = 96;
    c.rope_dim = 32;  // nope = 64: one FP8 block
    c.q_lora_rank = 64;
    c.o_lora_rank = 64;
    c.o_groups = 2;
    c.window = 16;
    c.indexer_heads = 2;
    c.indexer_dim = 64;
    c.indexer_top_k = 4;
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.n_expert_shared = 1;
    c.expert_ff = 256;
    c.n_hash_layers = 3;
    c.context_length = 4096;
    return c;
}

// small: larger but still quick (F16 by default). Every class except `compressor` (its ape
// rows are 128 wide) has 256-multiple rows, so K/IQ formats work for all of them.
ModelConfig small() {
    ModelConfig c;
    c.name = "ds4-gguf-gen small";
    c.set_layer_count(8);
    c.n_embd = 512;
    c.n_vocab = 4096;
    c.n_head = 8;
    c.head_dim = 128;
    c.rope_dim = 64;
    c.q_lora_rank = 256;
    c.o_lora_rank = 128;
    c.o_groups = 4;  // output_a rows: 8*128/4 = 256 wide
    c.window = 32;
    c.indexer_heads = 4;
    c.indexer_dim = 64;
    c.indexer_top_k = 8;
    c.n_expert = 16;
    c.n_expert_used = 4;
    c.n_expert_shared = 1;
    c.expert_ff = 256;
    c.n_hash_layers = 3;
    c.context_length = 8192;
    return c;
}

template <class T, class U>
void apply(std::optional<T> o, U& field) {
    if (o) field = U(*o);
}

void parse_type(const std::string& spec, TypeRecipe& r) {
    const size_t eq = spec.find('=');
    if (eq == std::string::npos)
        fail("--type {}: expected CLASS=TYPE (e.g. exps=q4_k)", spec);
    const std::string cls = spec.substr(0, eq), ty = spec.substr(eq + 1);
    auto classes = deepseek4::tensor_classes_from_name(cls);
    if (!classes)
        fail("--type {}: unknown class '{}' (all, embd, output, dense, shared, gate_up_exps, "
             "down_exps, exps, hc, compressor, indexer, router, mtp_proj)",
             spec, cls);
    auto t = tensor_type_from_name(ty);
    if (!t || !quant::is_weight_format(*t))
        fail("--type {}: unknown or unsupported type '{}' (f32, f16, bf16, q8_0, q4_0, q2_k, "
             "q4_k, q5_k, q6_k, iq2_xxs, mxfp4)",
             spec, ty);
    for (TensorClass c : *classes) r.set(c, *t);
}

}  // namespace

GenPlan make_plan(const std::string& preset, const Overrides& ov, uint64_t seed, bool real_vocab,
                  bool sparse) {
    GenPlan p;
    p.preset = preset;
    p.seed = seed;
    p.real_vocab = real_vocab;
    p.sparse = sparse;
    p.threads = int(std::max(1u, std::thread::hardware_concurrency()));

    ModelConfig& c = p.cfg;
    if (preset == "tiny") {
        c = tiny();
        p.types = TypeRecipe::uniform(TensorType::F32);
    } else if (preset == "small") {
        c = small();
        p.types = TypeRecipe::uniform(TensorType::F16);
    } else if (preset == "flash") {
        c = ModelConfig::flash();
        c.name = "ds4-gguf-gen flash";
        p.types = TypeRecipe::flash_q2();
    } else if (preset == "pro") {
        // spec/ARCHITECTURE.md §1.3. No PRO q2 recipe is specified; the Flash q2 one fits every
        // PRO row (7168, 1536, 3072 and 16384 are multiples of 256).
        c = ModelConfig::pro();
        c.name = "ds4-gguf-gen pro";
        p.types = TypeRecipe::flash_q2();
    } else {
        fail("unknown preset '{}' (tiny, small, flash, pro)", preset);
    }

    if (ov.layers) {
        if (*ov.layers == 0) fail("--layers must be >= 1");
        // Truncating keeps the preset's own ratio pattern (PRO starts 128,128,4,…).
        c.set_layer_count(*ov.layers, preset == "pro" ? ModelConfig::pro_ratio
                                                      : ModelConfig::flash_ratio);
    }
    if (ov.ratios) {
        const auto& r = *ov.ratios;
        if (r.empty()) fail("--ratios: empty list");
        if (ov.layers && r.size() != *ov.layers)
            fail("--ratios has {} entries but --layers is {}", r.size(), *ov.layers);
        if (!ov.layers) c.set_layer_count(uint32_t(r.size()));
        for (size_t i = 0; i < r.size(); ++i) {
            if (r[i] != 0 && r[i] != 4 && r[i] != 128)
                fail("--ratios: entry {} is {}; only 0, 4 and 128 exist", i, r[i]);
            c.compress_ratios[i] = r[i];
        }
    }
    c.n_hash_layers = std::min(c.n_hash_layers, c.n_layer);
    apply(ov.hash_layers, c.n_hash_layers);
    apply(ov.embd, c.n_embd);
    if (real_vocab) c.n_vocab = kRealVocabSize;
    apply(ov.vocab, c.n_vocab);
    apply(ov.heads, c.n_head);
    apply(ov.head_dim, c.head_dim);
    apply(ov.rope_dim, c.rope_dim);
    apply(ov.q_rank, c.q_lora_rank);
    apply(ov.o_rank, c.o_lora_rank);
    apply(ov.o_groups, c.o_groups);
    apply(ov.experts, c.n_expert);
    apply(ov.experts_used, c.n_expert_used);
    apply(ov.shared_experts, c.n_expert_shared);
    apply(ov.ff, c.expert_ff);
    apply(ov.indexer_heads, c.indexer_heads);
    apply(ov.indexer_dim, c.indexer_dim);
    apply(ov.indexer_top_k, c.indexer_top_k);
    apply(ov.window, c.window);
    apply(ov.hc, c.hc);
    apply(ov.ctx, c.context_length);
    c.name += " seed " + std::to_string(seed);
    c.validate();
    if (real_vocab && c.n_vocab < kRealVocabMinSize)
        fail("--real-vocab needs --vocab >= {} (the highest V4 id used is {}), got {}",
             kRealVocabMinSize, kRealVocabMinSize - 1, c.n_vocab);

    for (const std::string& t : ov.types) parse_type(t, p.types);

    // Every tensor's rows must hold whole blocks of its type (those of an MTP head too: the
    // embedded head's rows are the support file's, concatenated).
    std::vector<deepseek4::TensorSpec> specs = deepseek4::tensor_layout(c);
    for (deepseek4::TensorSpec& s : deepseek4::mtp_support_layout(c)) specs.push_back(std::move(s));
    for (const deepseek4::TensorSpec& s : specs) {
        const TensorType t = p.types.of(s.cls);
        const auto info = tensor_type_info(t);
        if (s.ne[0] % info->block_values != 0)
            fail("type {} for class {}: tensor {} has rows of {} values, not a multiple of the "
                 "{}-value block; choose another type for that class (--type {}=...)",
                 info->name, deepseek4::tensor_class_name(s.cls), s.name, s.ne[0],
                 info->block_values, deepseek4::tensor_class_name(s.cls));
    }
    return p;
}

}  // namespace ds4::gen
