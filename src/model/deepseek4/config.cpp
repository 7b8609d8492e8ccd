#include "model/deepseek4/config.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/metadata_reader.h"

namespace ds4::deepseek4 {

using gguf::Value;
using gguf::ValueType;

std::string arch_key(const char* suffix) { return std::string(kArchitecture) + "." + suffix; }

ModelConfig ModelConfig::flash() {
    ModelConfig c;
    c.set_layer_count(43);
    return c;
}

// spec/ARCHITECTURE.md §1.3 (the PRO column). Everything not listed there is Flash's value.
ModelConfig ModelConfig::pro() {
    ModelConfig c;
    c.name = "DeepSeek-V4-Pro";
    c.n_embd = 7168;
    c.n_head = 128;
    c.q_lora_rank = 1536;
    c.o_groups = 16;  // 8 heads per group, as in Flash
    c.indexer_top_k = 1024;
    c.n_expert = 384;
    c.expert_ff = 3072;
    c.expert_weights_scale = 2.5f;
    c.set_layer_count(61, pro_ratio);
    return c;
}

uint32_t ModelConfig::flash_ratio(uint32_t layer) {
    if (layer < 2) return 0;
    return layer % 2 == 0 ? 4 : 128;
}

uint32_t ModelConfig::pro_ratio(uint32_t layer) {
    if (layer < 2) return 128;
    return layer % 2 == 0 ? 4 : 128;
}

void ModelConfig::set_layer_count(uint32_t n, RatioSchedule schedule) {
    n_layer = n;
    compress_ratios.resize(n);
    for (uint32_t i = 0; i < n; ++i) compress_ratios[i] = schedule(i);
    const float clamp = swiglu_clamp_exp.empty() ? 10.0f : swiglu_clamp_exp[0];
    const float clamp_sh = swiglu_clamp_shexp.empty() ? clamp : swiglu_clamp_shexp[0];
    swiglu_clamp_exp.assign(n, clamp);
    swiglu_clamp_shexp.assign(n, clamp_sh);
}

namespace {

bool is_pow2(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

// Validation failures name the GGUF key that carries the field.
[[noreturn]] void bad(const char* suffix, const std::string& why) {
    fail("model config: {} {}", arch_key(suffix), why);
}

// Every count has a documented range (config.h): work and memory grow with them and the
// kernels take them as int, so a hostile file must not get past here with, say, 10^8 Sinkhorn
// iterations (a hang), 2^31 of them (negative as int) or a 2^31-token window (bad_alloc).
void in_range(const char* suffix, uint64_t v, uint64_t lo, uint64_t hi) {
    if (v < lo || v > hi) bad(suffix, fmt::format("is {}, expected {} to {}", v, lo, hi));
}

void positive_finite(const char* suffix, float v) {
    if (!std::isfinite(v) || v <= 0.0f) bad(suffix, fmt::format("must be finite and > 0, got {}", v));
}

}  // namespace

void ModelConfig::validate() const {
    in_range("block_count", n_layer, 1, kMaxLayers);
    in_range("nextn_predict_layers", n_nextn, 0, kMaxLayers);
    in_range("embedding_length", n_embd, 1, 65536);
    in_range("vocab_size", n_vocab, 1, 1u << 24);
    in_range("attention.head_count", n_head, 1, 4096);
    if (n_head_kv != 1) bad("attention.head_count_kv", fmt::format("must be 1 (MQA), got {}", n_head_kv));
    in_range("attention.key_length", head_dim, 1, 16384);
    if (rope_dim == 0 || rope_dim % 2 != 0 || rope_dim > head_dim)
        bad("rope.dimension_count",
            fmt::format("must be even, > 0 and <= key_length {}, got {}", head_dim, rope_dim));
    in_range("attention.q_lora_rank", q_lora_rank, 1, 65536);
    in_range("attention.output_lora_rank", o_lora_rank, 1, 65536);
    in_range("attention.output_group_count", o_groups, 1, n_head);
    if (n_head % o_groups != 0)
        bad("attention.output_group_count",
            fmt::format("{} does not divide head_count {}", o_groups, n_head));
    in_range("attention.sliding_window", window, 1, 8192);
    in_range("attention.indexer.head_count", indexer_heads, 1, 4096);
    if (!is_pow2(indexer_dim) || indexer_dim < rope_dim || indexer_dim > 16384)
        bad("attention.indexer.key_length",
            fmt::format("must be a power of two (Hadamard rotation), >= rope dims {} and <= 16384, "
                        "got {}", rope_dim, indexer_dim));
    in_range("attention.indexer.top_k", indexer_top_k, 1, 1u << 20);
    in_range("expert_count", n_expert, 1, 65536);
    if (n_expert_used == 0 || n_expert_used > n_expert)
        bad("expert_used_count",
            fmt::format("must be in [1, expert_count {}], got {}", n_expert, n_expert_used));
    in_range("expert_shared_count", n_expert_shared, 1, 64);
    in_range("expert_feed_forward_length", expert_ff, 1, 1u << 18);
    if (n_hash_layers > n_layer)
        bad("hash_layer_count",
            fmt::format("{} exceeds block_count {}", n_hash_layers, n_layer));
    if (!std::isfinite(expert_weights_scale))
        bad("expert_weights_scale", "must be finite");
    in_range("hyper_connection.count", hc, 1, 64);
    in_range("hyper_connection.sinkhorn_iterations", sinkhorn_iters, 1, 1000);
    positive_finite("hyper_connection.epsilon", hc_eps);
    positive_finite("attention.layer_norm_rms_epsilon", norm_eps);
    positive_finite("rope.freq_base", rope_base);
    positive_finite("attention.compress_rope_freq_base", compress_rope_base);
    if (!std::isfinite(yarn_factor) || yarn_factor < 1.0f)
        bad("rope.scaling.factor", fmt::format("must be >= 1, got {}", yarn_factor));
    in_range("rope.scaling.original_context_length", yarn_orig_ctx, 1, uint64_t(1) << 40);
    positive_finite("rope.scaling.yarn_beta_fast", yarn_beta_fast);
    positive_finite("rope.scaling.yarn_beta_slow", yarn_beta_slow);
    in_range("context_length", context_length, 1, uint64_t(1) << 40);

    // Products that size tensors must stay far from overflow (every ne fits in int64 and
    // the largest 2-D tensors in 2^40 elements).
    const uint64_t q_rows = uint64_t(n_head) * head_dim;
    if (q_rows > (1u << 24) || uint64_t(n_embd) * hc > (1u << 24) ||
        uint64_t(o_groups) * o_lora_rank > (1u << 24) || uint64_t(indexer_heads) * indexer_dim > (1u << 24))
        bad("attention.head_count", "dimensions are implausibly large");

    if (compress_ratios.size() != n_layer)
        bad("attention.compress_ratios",
            fmt::format("has {} entries for {} layers", compress_ratios.size(), n_layer));
    for (size_t i = 0; i < compress_ratios.size(); ++i) {
        const uint32_t r = compress_ratios[i];
        if (r != 0 && r != 4 && r != 128)
            bad("attention.compress_ratios",
                fmt::format("entry {} is {}; only 0, 4 and 128 exist", i, r));
    }
    for (const auto* arr : {&swiglu_clamp_exp, &swiglu_clamp_shexp}) {
        const char* key = arr == &swiglu_clamp_exp ? "swiglu_clamp_exp" : "swiglu_clamp_shexp";
        if (arr->size() != n_layer)
            bad(key, fmt::format("has {} entries for {} layers", arr->size(), n_layer));
        for (size_t i = 0; i < arr->size(); ++i)
            if (!std::isfinite((*arr)[i]) || (*arr)[i] <= 0.0f)
                bad(key, fmt::format("entry {} must be finite and > 0, got {}", i, (*arr)[i]));
    }
}

std::vector<std::pair<std::string, Value>> ModelConfig::metadata() const {
    std::vector<std::pair<std::string, Value>> kv;
    auto put = [&](std::string key, Value v) { kv.emplace_back(std::move(key), std::move(v)); };
    auto u32 = [&](const char* s, uint32_t v) { put(arch_key(s), Value::u32(v)); };
    auto f32 = [&](const char* s, float v) { put(arch_key(s), Value::f32(v)); };

    put("general.architecture", Value::str(kArchitecture));
    put("general.name", Value::str(name));

    u32("block_count", n_layer + n_nextn);
    if (n_nextn > 0) u32("nextn_predict_layers", n_nextn);
    // llama.cpp requires u32 here; larger values need u64 (our reader accepts both).
    if (context_length <= std::numeric_limits<uint32_t>::max())
        u32("context_length", uint32_t(context_length));
    else
        put(arch_key("context_length"), Value::u64(context_length));
    u32("embedding_length", n_embd);
    u32("vocab_size", n_vocab);
    u32("attention.head_count", n_head);
    u32("attention.head_count_kv", n_head_kv);
    u32("attention.key_length", head_dim);
    u32("attention.value_length", head_dim);
    u32("rope.dimension_count", rope_dim);
    u32("attention.q_lora_rank", q_lora_rank);
    u32("attention.output_lora_rank", o_lora_rank);
    u32("attention.output_group_count", o_groups);
    u32("attention.sliding_window", window);
    u32("attention.indexer.head_count", indexer_heads);
    u32("attention.indexer.key_length", indexer_dim);
    u32("attention.indexer.top_k", indexer_top_k);
    // One entry per trunk layer plus the MTP block's 0, as the HF config (and so the
    // converted files) carry it; readers use only the first block_count entries. With MTP
    // blocks in the file, one 0 per block (llama.cpp reads block_count entries).
    std::vector<int32_t> ratios(compress_ratios.begin(), compress_ratios.end());
    ratios.resize(ratios.size() + std::max(n_nextn, 1u), 0);
    put(arch_key("attention.compress_ratios"), Value::array_i32(ratios));
    f32("attention.compress_rope_freq_base", compress_rope_base);
    f32("attention.layer_norm_rms_epsilon", norm_eps);
    u32("expert_count", n_expert);
    u32("expert_used_count", n_expert_used);
    u32("expert_shared_count", n_expert_shared);
    u32("expert_feed_forward_length", expert_ff);
    f32("expert_weights_scale", expert_weights_scale);
    put(arch_key("expert_weights_norm"), Value::boolean(expert_weights_norm));
    u32("expert_gating_func", kGatingSqrtSoftplus);
    u32("hash_layer_count", n_hash_layers);
    // llama.cpp wants exactly block_count clamps: an MTP block takes the last trunk layer's.
    auto clamps = [&](std::vector<float> v) {
        v.resize(v.size() + n_nextn, v.empty() ? 0.0f : v.back());
        return v;
    };
    put(arch_key("swiglu_clamp_exp"), Value::array_f32(clamps(swiglu_clamp_exp)));
    if (swiglu_clamp_shexp != swiglu_clamp_exp)
        put(arch_key("swiglu_clamp_shexp"), Value::array_f32(clamps(swiglu_clamp_shexp)));
    u32("hyper_connection.count", hc);
    u32("hyper_connection.sinkhorn_iterations", sinkhorn_iters);
    f32("hyper_connection.epsilon", hc_eps);
    f32("rope.freq_base", rope_base);
    // llama.cpp turns YaRN on for the compressed layers only when the type says "yarn".
    put(arch_key("rope.scaling.type"), Value::str("yarn"));
    f32("rope.scaling.factor", yarn_factor);
    if (yarn_orig_ctx <= std::numeric_limits<uint32_t>::max())
        u32("rope.scaling.original_context_length", uint32_t(yarn_orig_ctx));
    else
        put(arch_key("rope.scaling.original_context_length"), Value::u64(yarn_orig_ctx));
    f32("rope.scaling.yarn_beta_fast", yarn_beta_fast);
    f32("rope.scaling.yarn_beta_slow", yarn_beta_slow);
    return kv;
}

void ModelConfig::write_metadata(gguf::Writer& w) const {
    validate();
    for (auto& [k, v] : metadata()) w.set(k, v);
}

namespace {

// The deepseek4 keys through the family-neutral reader (model/metadata_reader.h), plus the
// compression-ratio array, which only this family has.
class KeyReader : public model::MetadataReader {
public:
    explicit KeyReader(const gguf::File& f) : model::MetadataReader(f, kArchitecture) {}

    std::vector<uint32_t> ratios(const char* suffix, uint32_t n) const {
        const std::string k = key(suffix);
        const Value& v = array(k, need(k), n, "an array of i32/u32");
        std::vector<uint32_t> out(n);
        for (uint32_t i = 0; i < n; ++i) {
            auto e = v.elem_int(i);
            if (!e) wrong(k, v, "an array of i32/u32");
            if (*e != 0 && *e != 4 && *e != 128)
                invalid(k, fmt::format("entry {} is {}; only 0, 4 and 128 exist", i, *e));
            out[i] = uint32_t(*e);
        }
        return out;
    }
};

}  // namespace

ModelConfig ModelConfig::from_gguf(const gguf::File& f) {
    KeyReader r(f);
    r.check_architecture();

    ModelConfig c;
    if (const Value* n = f.find("general.name"); n && n->as_string()) c.name = *n->as_string();
    {
        // The trunk is what the MTP blocks after it leave of block_count.
        const uint32_t blocks = r.u32("block_count");
        if (f.find(arch_key("nextn_predict_layers"))) c.n_nextn = r.u32("nextn_predict_layers");
        if (c.n_nextn >= blocks)
            r.invalid(arch_key("nextn_predict_layers"),
                      fmt::format("is {}, must be below block_count {} (the trunk needs a layer)", c.n_nextn,
                                  blocks));
        c.n_layer = blocks - c.n_nextn;
    }
    c.context_length = r.u64("context_length");
    c.n_embd = r.u32("embedding_length");
    c.n_vocab = r.u32("vocab_size");
    c.n_head = r.u32("attention.head_count");
    c.n_head_kv = r.u32("attention.head_count_kv");
    c.head_dim = r.u32("attention.key_length");
    if (const uint32_t v = r.u32("attention.value_length"); v != c.head_dim)
        r.invalid(arch_key("attention.value_length"),
                  fmt::format("is {}, must equal attention.key_length {} (K = V)", v, c.head_dim));
    c.rope_dim = r.u32("rope.dimension_count");
    c.q_lora_rank = r.u32("attention.q_lora_rank");
    c.o_lora_rank = r.u32("attention.output_lora_rank");
    c.o_groups = r.u32("attention.output_group_count");
    c.window = r.u32("attention.sliding_window");
    c.indexer_heads = r.u32("attention.indexer.head_count");
    c.indexer_dim = r.u32("attention.indexer.key_length");
    c.indexer_top_k = r.u32("attention.indexer.top_k");
    c.compress_rope_base = r.f32("attention.compress_rope_freq_base");
    c.norm_eps = r.f32("attention.layer_norm_rms_epsilon");
    c.n_expert = r.u32("expert_count");
    c.n_expert_used = r.u32("expert_used_count");
    c.n_expert_shared = r.u32("expert_shared_count");
    c.expert_ff = r.u32("expert_feed_forward_length");
    r.absent_or("expert_group_count", 0, "group-limited routing is not part of this model");
    r.absent_or("expert_group_used_count", 0, "group-limited routing is not part of this model");
    c.expert_weights_scale = r.f32("expert_weights_scale");
    c.expert_weights_norm = r.boolean("expert_weights_norm");
    // DS4's files may omit it (DS4 hard-codes sqrt-softplus); any other value is another model.
    r.absent_or("expert_gating_func", kGatingSqrtSoftplus,
                "only 4 (sqrt-softplus scoring) is supported");
    c.n_hash_layers = r.u32("hash_layer_count");
    c.hc = r.u32("hyper_connection.count");
    c.sinkhorn_iters = r.u32("hyper_connection.sinkhorn_iterations");
    c.hc_eps = r.f32("hyper_connection.epsilon");
    c.rope_base = r.f32("rope.freq_base");
    if (const Value* t = f.find(arch_key("rope.scaling.type"))) {
        const std::string* s = t->as_string();
        if (!s) r.wrong(arch_key("rope.scaling.type"), *t, "string");
        if (*s != "yarn")
            r.invalid(arch_key("rope.scaling.type"),
                      fmt::format("is \"{}\"; the compressed layers use \"yarn\"", *s));
    }
    c.yarn_factor = r.f32("rope.scaling.factor");
    c.yarn_orig_ctx = r.u64("rope.scaling.original_context_length");
    c.yarn_beta_fast = r.f32("rope.scaling.yarn_beta_fast");
    c.yarn_beta_slow = r.f32("rope.scaling.yarn_beta_slow");

    // block_count must be sane before it sizes the arrays below.
    if (c.n_layer == 0 || c.n_layer > kMaxLayers)
        r.invalid(arch_key("block_count"),
                  c.n_nextn == 0 ? fmt::format("is {}, expected 1 to {}", c.n_layer, kMaxLayers)
                                 : fmt::format("leaves {} trunk layers after {} MTP blocks, expected 1 to {}",
                                               c.n_layer, c.n_nextn, kMaxLayers));
    c.compress_ratios = r.ratios("attention.compress_ratios", c.n_layer);
    {
        const std::string key = arch_key("swiglu_clamp_exp");
        c.swiglu_clamp_exp = r.floats(key, r.need(key), c.n_layer);
    }
    {
        const std::string key = arch_key("swiglu_clamp_shexp");
        const Value* v = f.find(key);
        c.swiglu_clamp_shexp = v ? r.floats(key, *v, c.n_layer) : c.swiglu_clamp_exp;
    }

    try {
        c.validate();
    } catch (const Error& e) {
        fail("{}: {}", f.path(), e.what());
    }
    return c;
}

}  // namespace ds4::deepseek4
