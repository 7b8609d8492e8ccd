#include "model/deepseek4/layout.h"

#include <cstdio>
#include <cstring>
#include <iterator>
#include <set>

#include "common/error.h"
#include "gguf/reader.h"
#include "model/deepseek4/split.h"
#include "model/tensor_check.h"
#include "quant/quant.h"

namespace ds4::deepseek4 {

namespace {

constexpr std::array<std::string_view, kTensorClassCount> kClassNames = {
    "embd", "output", "dense", "shared", "gate_up_exps", "down_exps",
    "hc", "compressor", "indexer", "router", "norm", "tid2eid", "mtp_proj",
};

}  // namespace

std::string_view tensor_class_name(TensorClass c) { return kClassNames.at(size_t(c)); }

bool is_selectable(TensorClass c) { return c != TensorClass::Norm && c != TensorClass::Tid2Eid; }

std::optional<std::vector<TensorClass>> tensor_classes_from_name(std::string_view name) {
    std::vector<TensorClass> out;
    if (name == "all") {
        for (int i = 0; i < kTensorClassCount; ++i)
            if (is_selectable(TensorClass(i))) out.push_back(TensorClass(i));
        return out;
    }
    if (name == "exps") return std::vector{TensorClass::GateUpExps, TensorClass::DownExps};
    for (int i = 0; i < kTensorClassCount; ++i)
        if (kClassNames[size_t(i)] == name && is_selectable(TensorClass(i)))
            return std::vector{TensorClass(i)};
    return std::nullopt;
}

void TypeRecipe::set(TensorClass c, TensorType t) {
    if (!is_selectable(c))
        fail("tensor class {} has a fixed type ({})", tensor_class_name(c),
             tensor_type_name(of(c)));
    type[size_t(c)] = t;
}

TypeRecipe TypeRecipe::uniform(TensorType t) {
    TypeRecipe r;
    r.type.fill(t);
    r.type[size_t(TensorClass::Norm)] = TensorType::F32;
    r.type[size_t(TensorClass::Tid2Eid)] = TensorType::I32;
    return r;
}

TypeRecipe TypeRecipe::flash_q2() {
    TypeRecipe r = uniform(TensorType::F16);
    r.set(TensorClass::Output, TensorType::Q8_0);
    r.set(TensorClass::Dense, TensorType::Q8_0);
    r.set(TensorClass::Shared, TensorType::Q8_0);
    r.set(TensorClass::GateUpExps, TensorType::IQ2_XXS);
    r.set(TensorClass::DownExps, TensorType::Q2_K);
    r.set(TensorClass::MtpProj, TensorType::Q8_0);
    return r;
}

int64_t TensorSpec::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

LayerKind LayerKind::of(const ModelConfig& c, uint32_t il) { return {c.compress_ratio(il), c.is_hash_layer(il)}; }

std::vector<TensorSpec> layer_tensor_layout(const ModelConfig& c, const std::string& prefix, int layer, LayerKind kind) {
    using C = TensorClass;
    if (kind.ratio != 0 && kind.ratio != 4 && kind.ratio != 128)
        fail("layer {}: compression ratio {} (expected 0, 4 or 128)", prefix, kind.ratio);
    std::vector<TensorSpec> out;
    auto add = [&](const char* suffix, std::vector<int64_t> ne, C cls) {
        out.push_back({prefix + suffix, std::move(ne), cls, layer});
    };
    const int64_t D = c.n_embd, V = c.n_vocab, Dh = c.head_dim, Rq = c.q_lora_rank;
    const int64_t H = c.n_head, G = c.o_groups, Ro = c.o_lora_rank;
    const int64_t E = c.n_expert, F = c.expert_ff, Fsh = int64_t(c.expert_ff) * c.n_expert_shared;
    const int64_t HCD = c.hc_dim(), MIX = c.hc_mix();
    const int64_t HI = c.indexer_heads, DI = c.indexer_dim;
    const int64_t r = kind.ratio;

    add("hc_attn_fn.weight", {HCD, MIX}, C::Hc);
    add("hc_attn_scale.weight", {3}, C::Norm);
    add("hc_attn_base.weight", {MIX}, C::Norm);
    add("attn_norm.weight", {D}, C::Norm);
    add("attn_q_a.weight", {D, Rq}, C::Dense);
    add("attn_q_a_norm.weight", {Rq}, C::Norm);
    add("attn_q_b.weight", {Rq, H * Dh}, C::Dense);
    add("attn_kv.weight", {D, Dh}, C::Dense);
    add("attn_kv_a_norm.weight", {Dh}, C::Norm);
    add("attn_sinks.weight", {H}, C::Norm);
    // Group g's [Ro, H/G·Dh] matrix is rows g·Ro … g·Ro+Ro-1 (§3.3.8).
    add("attn_output_a.weight", {H * Dh / G, G * Ro}, C::Dense);
    add("attn_output_b.weight", {G * Ro, D}, C::Dense);
    if (r != 0) {
        const int64_t coff = r == 4 ? 2 : 1;  // ratio 4 pools overlapping windows
        add("attn_compressor_ape.weight", {coff * Dh, r}, C::Compressor);
        add("attn_compressor_kv.weight", {D, coff * Dh}, C::Compressor);
        add("attn_compressor_gate.weight", {D, coff * Dh}, C::Compressor);
        add("attn_compressor_norm.weight", {Dh}, C::Norm);
    }
    if (r == 4) {
        add("indexer.attn_q_b.weight", {Rq, HI * DI}, C::Indexer);
        add("indexer.proj.weight", {D, HI}, C::Indexer);
        add("indexer_compressor_ape.weight", {2 * DI, r}, C::Compressor);
        add("indexer_compressor_kv.weight", {D, 2 * DI}, C::Compressor);
        add("indexer_compressor_gate.weight", {D, 2 * DI}, C::Compressor);
        add("indexer_compressor_norm.weight", {DI}, C::Norm);
    }
    add("hc_ffn_fn.weight", {HCD, MIX}, C::Hc);
    add("hc_ffn_scale.weight", {3}, C::Norm);
    add("hc_ffn_base.weight", {MIX}, C::Norm);
    add("ffn_norm.weight", {D}, C::Norm);
    add("ffn_gate_inp.weight", {D, E}, C::Router);
    if (kind.hash)
        add("ffn_gate_tid2eid.weight", {int64_t(c.n_expert_used), V}, C::Tid2Eid);
    else
        add("exp_probs_b.bias", {E}, C::Norm);
    add("ffn_gate_exps.weight", {D, F, E}, C::GateUpExps);
    add("ffn_up_exps.weight", {D, F, E}, C::GateUpExps);
    add("ffn_down_exps.weight", {F, D, E}, C::DownExps);
    add("ffn_gate_shexp.weight", {D, Fsh}, C::Shared);
    add("ffn_up_shexp.weight", {D, Fsh}, C::Shared);
    add("ffn_down_shexp.weight", {Fsh, D}, C::Shared);
    return out;
}

std::vector<TensorSpec> tensor_layout(const ModelConfig& c) {
    c.validate();
    using C = TensorClass;
    std::vector<TensorSpec> out;
    auto global = [&](std::string name, std::vector<int64_t> ne, C cls) {
        out.push_back({std::move(name), std::move(ne), cls, -1});
    };
    const int64_t D = c.n_embd, V = c.n_vocab, HCD = c.hc_dim();

    global("token_embd.weight", {D, V}, C::Embd);
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        std::vector<TensorSpec> layer = layer_tensor_layout(c, fmt::format("blk.{}.", il), int(il), LayerKind::of(c, il));
        std::move(layer.begin(), layer.end(), std::back_inserter(out));
    }
    global("output_hc_fn.weight", {HCD, int64_t(c.hc)}, C::Hc);
    global("output_hc_base.weight", {int64_t(c.hc)}, C::Norm);
    global("output_hc_scale.weight", {1}, C::Norm);
    global("output_norm.weight", {D}, C::Norm);
    global("output.weight", {D, V}, C::Output);
    return out;
}

namespace {

void check_tid2eid(const gguf::File& f, const gguf::TensorInfo& t, const ModelConfig& c) {
    const uint8_t* p = f.data(t);
    const int64_t n = t.n_elements();
    for (int64_t i = 0; i < n; ++i) {
        int32_t id;
        std::memcpy(&id, p + 4 * i, 4);
        if (id < 0 || uint32_t(id) >= c.n_expert)
            fail("{}: tensor {}: entry {} (token {}) is expert id {}, expected [0, {})", f.path(),
                 t.name, i, i / int64_t(c.n_expert_used), id, c.n_expert);
    }
}

// A tensor of the layout as found in the file: its shape, type and (tid2eid) entries.
void check_tensor(const gguf::File& f, const ModelConfig& cfg, const gguf::TensorInfo& t, const TensorSpec& s) {
    const model::TypeRule rule = s.cls == TensorClass::Norm      ? model::TypeRule::F32
                                 : s.cls == TensorClass::Tid2Eid ? model::TypeRule::I32
                                                                 : model::TypeRule::Weight;
    model::check_tensor(f, t, s.name, s.ne, rule);
    if (s.cls == TensorClass::Tid2Eid) check_tid2eid(f, t, cfg);
}

// DS4 declares exp_probs_b optional on every layer; a hash layer that carries it does not use
// it, but it must still have the bias's shape and type.
TensorSpec unused_probs_b(const ModelConfig& cfg, const std::string& name, int layer) {
    return {name, {int64_t(cfg.n_expert)}, TensorClass::Norm, layer};
}

}  // namespace

void validate_layer_tensors(const gguf::File& f, const ModelConfig& cfg, const std::string& prefix, LayerKind kind,
                            int layer) {
    for (const TensorSpec& s : layer_tensor_layout(cfg, prefix, layer, kind)) {
        const gguf::TensorInfo* t = f.find_tensor(s.name);
        if (!t)
            fail("{}: tensor {} missing (expected shape {}, class {})", f.path(), s.name, model::shape_str(s.ne),
                 tensor_class_name(s.cls));
        check_tensor(f, cfg, *t, s);
    }
    if (kind.hash)
        if (const gguf::TensorInfo* t = f.find_tensor(prefix + "exp_probs_b.bias"))
            check_tensor(f, cfg, *t, unused_probs_b(cfg, t->name, layer));
}

void validate_tensor(const gguf::File& f, const ModelConfig& cfg, const TensorSpec& s) {
    const gguf::TensorInfo* t = f.find_tensor(s.name);
    if (!t)
        fail("{}: tensor {} missing (expected shape {}, class {})", f.path(), s.name, model::shape_str(s.ne),
             tensor_class_name(s.cls));
    check_tensor(f, cfg, *t, s);
}

bool in_range(const TensorSpec& s, const model::LayerRange& range) {
    if (s.layer >= 0) return range.contains(uint32_t(s.layer));
    return s.cls == TensorClass::Embd ? range.embedding() : range.output;
}

void validate_tensors(const gguf::File& f, const ModelConfig& cfg, const model::LayerRange& range) {
    const std::vector<TensorSpec> layout = tensor_layout(cfg);
    std::set<std::string> expected;
    for (const TensorSpec& s : layout) {
        expected.insert(s.name);
        if (!in_range(s, range)) continue;
        const gguf::TensorInfo* t = f.find_tensor(s.name);
        if (!t) {
            // A split file says which range it holds: the usual cause is opening it for another.
            const auto held = split_layers(f);
            fail("{}: tensor {} missing (expected shape {}, class {}{}){}", f.path(), s.name,
                 model::shape_str(s.ne), tensor_class_name(s.cls),
                 range.whole(cfg.n_layer) ? "" : ", needed by layers " + range.str(),
                 held ? "; this split file holds layers " + *held + " only: open it with --layers " +
                            *held + " (or a range inside it)"
                      : "");
        }
        check_tensor(f, cfg, *t, s);
    }
    for (const gguf::TensorInfo& t : f.tensors()) {
        if (expected.count(t.name)) continue;
        // DS4 declares exp_probs_b optional on every layer; on a hash layer it is unused.
        unsigned layer = 0;
        char tail[32] = {};
        if (std::sscanf(t.name.c_str(), "blk.%u.%31s", &layer, tail) == 2 &&
            std::string_view(tail) == "exp_probs_b.bias" && layer < cfg.n_layer &&
            cfg.is_hash_layer(layer)) {
            if (!range.contains(layer)) continue;
            check_tensor(f, cfg, t, unused_probs_b(cfg, t.name, int(layer)));
            continue;
        }
        // The MTP blocks after the trunk belong to the MTP head, which checks them.
        if (std::sscanf(t.name.c_str(), "blk.%u.", &layer) == 1 && layer >= cfg.n_layer &&
            layer - cfg.n_layer < cfg.n_nextn)
            continue;
        fail("{}: unexpected tensor {} (type {}, shape {}): not part of the deepseek4 layout "
             "for {} layers",
             f.path(), t.name, tensor_type_name(t.type), t.shape_string(), cfg.n_layer);
    }
}

namespace {

constexpr LayerKind kMtpBlock{0, false};  // raw window only, biased top-k routing

}  // namespace

std::vector<TensorSpec> mtp_support_layout(const ModelConfig& c) {
    using C = TensorClass;
    const int layer = int(c.n_layer);
    const int64_t D = c.n_embd, HC = c.hc;
    std::vector<TensorSpec> out;
    auto add = [&](const char* suffix, std::vector<int64_t> ne, C cls) {
        out.push_back({std::string("mtp.0.") + suffix, std::move(ne), cls, layer});
    };
    add("hc_head_base.weight", {HC}, C::Norm);
    add("hc_head_fn.weight", {int64_t(c.hc_dim()), HC}, C::Hc);
    add("hc_head_scale.weight", {1}, C::Norm);
    add("e_proj.weight", {D, D}, C::MtpProj);
    add("h_proj.weight", {D, D}, C::MtpProj);
    add("enorm.weight", {D}, C::Norm);
    add("hnorm.weight", {D}, C::Norm);
    add("norm.weight", {D}, C::Norm);
    std::vector<TensorSpec> block = layer_tensor_layout(c, "mtp.0.", layer, kMtpBlock);
    std::move(block.begin(), block.end(), std::back_inserter(out));
    return out;
}

NextnLayout mtp_embedded_layout(const ModelConfig& c, uint32_t block) {
    using C = TensorClass;
    const std::string prefix = fmt::format("blk.{}.", block);
    const int64_t D = c.n_embd, V = c.n_vocab;
    NextnLayout out;
    out.required = layer_tensor_layout(c, prefix, int(block), kMtpBlock);
    auto add = [&](std::vector<TensorSpec>& to, const char* suffix, std::vector<int64_t> ne, C cls) {
        to.push_back({prefix + "nextn." + suffix, std::move(ne), cls, int(block)});
    };
    add(out.required, "eh_proj.weight", {2 * D, D}, C::MtpProj);
    add(out.required, "enorm.weight", {D}, C::Norm);
    add(out.required, "hnorm.weight", {D}, C::Norm);
    add(out.optional, "shared_head_norm.weight", {D}, C::Norm);
    add(out.optional, "embed_tokens.weight", {D, V}, C::Embd);
    add(out.optional, "shared_head_head.weight", {D, V}, C::Output);
    return out;
}

void validate_specs(const gguf::File& f, const ModelConfig& cfg, const std::vector<TensorSpec>& specs,
                    bool required) {
    for (const TensorSpec& s : specs) {
        const gguf::TensorInfo* t = f.find_tensor(s.name);
        if (!t) {
            if (!required) continue;
            fail("{}: tensor {} missing (expected shape {}, class {})", f.path(), s.name, model::shape_str(s.ne),
                 tensor_class_name(s.cls));
        }
        check_tensor(f, cfg, *t, s);
    }
}

}  // namespace ds4::deepseek4
