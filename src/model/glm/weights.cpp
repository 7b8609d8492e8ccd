#include "model/glm/weights.h"

#include <fmt/format.h>

#include "model/tensor_binder.h"

namespace ds4::glm {

LayerWeights bind_layer(const gguf::File& f, const GlmConfig& c, const std::string& prefix, int index,
                        bool full_indexer, bool dense) {
    (void)c;
    const model::TensorBinder b(f);
    auto n = [&](const char* suffix) { return prefix + suffix; };
    LayerWeights L;
    L.index = index;
    L.full_indexer = full_indexer;
    L.dense = dense;
    L.attn_norm = b.f32(n("attn_norm.weight"));
    L.q_a = b.matrix(n("attn_q_a.weight"));
    L.q_a_norm = b.f32(n("attn_q_a_norm.weight"));
    L.q_b = b.matrix(n("attn_q_b.weight"));
    L.kv_a = b.matrix(n("attn_kv_a_mqa.weight"));
    L.kv_a_norm = b.f32(n("attn_kv_a_norm.weight"));
    L.k_b = b.matrix(n("attn_k_b.weight"));
    L.v_b = b.matrix(n("attn_v_b.weight"));
    L.out = b.matrix(n("attn_output.weight"));
    if (full_indexer) {
        L.idx_k_norm = b.f32(n("indexer.k_norm.weight"));
        L.idx_k_norm_b = b.f32(n("indexer.k_norm.bias"));
        L.idx_proj = b.matrix(n("indexer.proj.weight"));
        L.idx_k = b.matrix(n("indexer.attn_k.weight"));
        L.idx_q_b = b.matrix(n("indexer.attn_q_b.weight"));
    }
    L.ffn_norm = b.f32(n("ffn_norm.weight"));
    if (dense) {
        L.dense_ffn = {b.matrix(n("ffn_gate.weight")), b.matrix(n("ffn_up.weight")), b.matrix(n("ffn_down.weight"))};
        return L;
    }
    L.router = b.matrix(n("ffn_gate_inp.weight"));
    L.exp_probs_b = b.f32_optional(n("exp_probs_b.bias"));
    L.gate_exps = b.experts(n("ffn_gate_exps.weight"));
    L.up_exps = b.experts(n("ffn_up_exps.weight"));
    L.down_exps = b.experts(n("ffn_down_exps.weight"));
    L.shared = {b.matrix(n("ffn_gate_shexp.weight")), b.matrix(n("ffn_up_shexp.weight")),
                b.matrix(n("ffn_down_shexp.weight"))};
    return L;
}

Weights Weights::bind(const gguf::File& f, const GlmConfig& c, const model::LayerRange& range) {
    const model::TensorBinder b(f);
    Weights w;
    if (range.embedding()) w.token_embd = b.matrix("token_embd.weight");
    w.layers.resize(c.n_layer);
    for (uint32_t il = 0; il < c.n_layer; ++il) {
        LayerWeights& L = w.layers[il];
        L.index = int(il);
        L.full_indexer = c.indexer_is_full(il);
        L.dense = c.is_dense(il);
        if (range.contains(il)) L = bind_layer(f, c, fmt::format("blk.{}.", il), int(il), L.full_indexer, L.dense);
    }
    if (!range.output) return w;
    w.output_norm = b.f32("output_norm.weight");
    w.output = b.has("output.weight") ? b.matrix("output.weight") : b.matrix("token_embd.weight");
    return w;
}

}  // namespace ds4::glm
