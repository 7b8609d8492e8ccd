#include "model/glm/layout.h"

#include <fmt/format.h>

#include <array>
#include <cstdio>
#include <iterator>
#include <set>

#include "common/error.h"
#include "gguf/reader.h"
#include "model/tensor_check.h"

namespace ds4::glm {
namespace {

constexpr std::array<std::string_view, kTensorClassCount> kClassNames = {
    "embd", "output", "attn", "indexer", "indexer_proj", "dense_ffn", "shared", "gate_up_exps", "down_exps",
    "router", "norm", "mtp_proj",
};

model::TypeRule rule_of(TensorClass c) {
    return c == TensorClass::Norm ? model::TypeRule::F32 : model::TypeRule::Weight;
}

}  // namespace

std::string_view tensor_class_name(TensorClass c) { return kClassNames.at(size_t(c)); }

std::optional<std::vector<TensorClass>> tensor_classes_from_name(std::string_view name) {
    std::vector<TensorClass> out;
    if (name == "all") {
        for (int i = 0; i < kTensorClassCount; ++i)
            if (TensorClass(i) != TensorClass::Norm) out.push_back(TensorClass(i));
        return out;
    }
    if (name == "exps") return std::vector{TensorClass::GateUpExps, TensorClass::DownExps};
    for (int i = 0; i < kTensorClassCount; ++i)
        if (kClassNames[size_t(i)] == name && TensorClass(i) != TensorClass::Norm) return std::vector{TensorClass(i)};
    return std::nullopt;
}

int64_t TensorSpec::n_elements() const {
    int64_t n = 1;
    for (int64_t d : ne) n *= d;
    return n;
}

std::vector<TensorSpec> layer_tensor_layout(const GlmConfig& c, const std::string& prefix, int layer,
                                            bool full_indexer, bool dense) {
    using C = TensorClass;
    const int64_t D = c.n_embd, H = c.n_head, Rq = c.q_lora_rank, Rkv = c.kv_lora_rank, Dr = c.rope_dim;
    const int64_t nope = c.qk_nope_dim, Dv = c.v_head_dim, HI = c.indexer_heads, DI = c.indexer_dim;
    const int64_t E = c.n_expert, F = c.expert_ff, Fs = int64_t(c.expert_ff) * c.n_expert_shared;
    std::vector<TensorSpec> out;
    auto add = [&](const char* suffix, std::vector<int64_t> ne, C cls, bool optional = false) {
        out.push_back({prefix + suffix, std::move(ne), cls, layer, optional});
    };
    add("attn_norm.weight", {D}, C::Norm);
    add("attn_q_a.weight", {D, Rq}, C::Attn);
    add("attn_q_a_norm.weight", {Rq}, C::Norm);
    add("attn_q_b.weight", {Rq, H * (nope + Dr)}, C::Attn);
    add("attn_kv_a_mqa.weight", {D, Rkv + Dr}, C::Attn);
    add("attn_kv_a_norm.weight", {Rkv}, C::Norm);
    add("attn_k_b.weight", {nope, Rkv, H}, C::Attn);
    add("attn_v_b.weight", {Rkv, Dv, H}, C::Attn);
    add("attn_output.weight", {H * Dv, D}, C::Attn);
    if (full_indexer) {
        add("indexer.k_norm.weight", {DI}, C::Norm);
        add("indexer.k_norm.bias", {DI}, C::Norm);
        add("indexer.proj.weight", {D, HI}, C::IndexerProj);
        add("indexer.attn_k.weight", {D, DI}, C::Indexer);
        add("indexer.attn_q_b.weight", {Rq, HI * DI}, C::Indexer);
    }
    add("ffn_norm.weight", {D}, C::Norm);
    if (dense) {
        add("ffn_gate.weight", {D, int64_t(c.dense_ff)}, C::DenseFfn);
        add("ffn_up.weight", {D, int64_t(c.dense_ff)}, C::DenseFfn);
        add("ffn_down.weight", {int64_t(c.dense_ff), D}, C::DenseFfn);
        return out;
    }
    add("ffn_gate_inp.weight", {D, E}, C::Router);
    add("exp_probs_b.bias", {E}, C::Norm, /*optional=*/true);
    add("ffn_gate_exps.weight", {D, F, E}, C::GateUpExps);
    add("ffn_up_exps.weight", {D, F, E}, C::GateUpExps);
    add("ffn_down_exps.weight", {F, D, E}, C::DownExps);
    add("ffn_gate_shexp.weight", {D, Fs}, C::Shared);
    add("ffn_up_shexp.weight", {D, Fs}, C::Shared);
    add("ffn_down_shexp.weight", {Fs, D}, C::Shared);
    return out;
}

std::vector<TensorSpec> tensor_layout(const GlmConfig& c) {
    const int64_t D = c.n_embd, V = c.n_vocab;
    std::vector<TensorSpec> out;
    out.push_back({"token_embd.weight", {D, V}, TensorClass::Embd, -1});
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        std::vector<TensorSpec> layer =
            layer_tensor_layout(c, fmt::format("blk.{}.", il), int(il), c.indexer_is_full(il), c.is_dense(il));
        std::move(layer.begin(), layer.end(), std::back_inserter(out));
    }
    out.push_back({"output_norm.weight", {D}, TensorClass::Norm, -1});
    out.push_back({"output.weight", {D, V}, TensorClass::Output, -1, /*optional=*/true});
    return out;
}

std::vector<TensorSpec> mtp_layout(const GlmConfig& c) {
    const int block = int(c.n_layer);
    const std::string prefix = fmt::format("blk.{}.", block);
    const int64_t D = c.n_embd, V = c.n_vocab;
    std::vector<TensorSpec> out = layer_tensor_layout(c, prefix, block, true, false);
    // llama.cpp loads the MTP block's indexer tensors as optional.
    for (TensorSpec& s : out)
        if (s.name.find(".indexer.") != std::string::npos) s.optional = true;
    out.push_back({prefix + "nextn.eh_proj.weight", {2 * D, D}, TensorClass::MtpProj, block});
    out.push_back({prefix + "nextn.enorm.weight", {D}, TensorClass::Norm, block});
    out.push_back({prefix + "nextn.hnorm.weight", {D}, TensorClass::Norm, block});
    out.push_back({prefix + "nextn.shared_head_norm.weight", {D}, TensorClass::Norm, block, true});
    out.push_back({prefix + "nextn.embed_tokens.weight", {D, V}, TensorClass::Embd, block, true});
    out.push_back({prefix + "nextn.shared_head_head.weight", {D, V}, TensorClass::Output, block, true});
    return out;
}

namespace {

bool in_range(const TensorSpec& s, const model::LayerRange& range) {
    if (s.layer >= 0) return range.contains(uint32_t(s.layer));
    return s.cls == TensorClass::Embd ? range.embedding() : range.output;
}

void check_spec(const gguf::File& f, const TensorSpec& s, const std::string& context) {
    const gguf::TensorInfo* t = f.find_tensor(s.name);
    if (!t) {
        if (s.optional) return;
        fail("{}: tensor {} missing (expected shape {}, class {}{})", f.path(), s.name, model::shape_str(s.ne),
             tensor_class_name(s.cls), context);
    }
    model::check_tensor(f, *t, s.name, s.ne, rule_of(s.cls));
}

}  // namespace

void validate_specs(const gguf::File& f, const std::vector<TensorSpec>& specs) {
    for (const TensorSpec& s : specs) check_spec(f, s, "");
}

void validate_tensors(const gguf::File& f, const GlmConfig& c, const model::LayerRange& range) {
    std::set<std::string> expected;
    const std::string context = range.whole(c.n_layer) ? "" : ", needed by layers " + range.str();
    for (const TensorSpec& s : tensor_layout(c)) {
        expected.insert(s.name);
        if (in_range(s, range)) check_spec(f, s, context);
    }
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        if (c.indexer_is_full(il)) continue;
        // A shared layer may still carry indexer tensors (converted files of GLM 5 / 5.1 do):
        // unused, but held to the full layer's shapes.
        for (const TensorSpec& s : layer_tensor_layout(c, fmt::format("blk.{}.", il), int(il), true, c.is_dense(il)))
            if (s.name.find(".indexer.") != std::string::npos && f.find_tensor(s.name)) {
                expected.insert(s.name);
                if (range.contains(il)) model::check_tensor(f, *f.find_tensor(s.name), s.name, s.ne, rule_of(s.cls));
            }
    }
    for (const gguf::TensorInfo& t : f.tensors()) {
        if (expected.count(t.name)) continue;
        unsigned layer = 0;
        // The MTP block belongs to the MTP drafter, which checks it when it is loaded.
        if (std::sscanf(t.name.c_str(), "blk.%u.", &layer) == 1 && layer >= c.n_layer && layer - c.n_layer < c.n_nextn)
            continue;
        fail("{}: unexpected tensor {} (type {}, shape {}): not part of the glm-dsa layout for {} layers", f.path(),
             t.name, tensor_type_name(t.type), t.shape_string(), c.n_layer);
    }
}

}  // namespace ds4::glm
