#include "model/deepseek4/weights.h"

#include <fmt/format.h>

#include "common/error.h"
#include "model/deepseek4/layout.h"
#include "model/tensor_binder.h"
#include "quant/quant.h"

namespace ds4::deepseek4 {
namespace {

using Binder = model::TensorBinder;

CompressorWeights compressor(const Binder& b, const std::string& prefix, int ratio, int width) {
    CompressorWeights c;
    c.ratio = ratio;
    c.width = width;
    c.coff = ratio == 4 ? 2 : 1;
    c.kv = b.matrix(prefix + "_kv.weight");
    c.gate = b.matrix(prefix + "_gate.weight");
    c.ape = b.dequantized(prefix + "_ape.weight");
    c.norm = b.f32(prefix + "_norm.weight");
    return c;
}

}  // namespace

LayerWeights bind_layer(const gguf::File& f, const ModelConfig& cfg, const std::string& prefix, int index,
                        LayerKind kind) {
    Binder b(f);
    LayerWeights L;
    L.index = index;
    L.ratio = int(kind.ratio);
    auto n = [&](const char* suffix) { return prefix + suffix; };
    L.hc_attn_fn = b.matrix(n("hc_attn_fn.weight"));
    L.hc_attn_scale = b.f32(n("hc_attn_scale.weight"));
    L.hc_attn_base = b.f32(n("hc_attn_base.weight"));
    L.attn_norm = b.f32(n("attn_norm.weight"));
    L.q_a = b.matrix(n("attn_q_a.weight"));
    L.q_a_norm = b.f32(n("attn_q_a_norm.weight"));
    L.q_b = b.matrix(n("attn_q_b.weight"));
    L.kv = b.matrix(n("attn_kv.weight"));
    L.kv_norm = b.f32(n("attn_kv_a_norm.weight"));
    L.sinks = b.f32(n("attn_sinks.weight"));
    L.out_a = b.matrix(n("attn_output_a.weight"));
    L.out_b = b.matrix(n("attn_output_b.weight"));
    if (L.ratio != 0) L.compressor = compressor(b, n("attn_compressor"), L.ratio, int(cfg.head_dim));
    if (L.ratio == 4) {
        L.indexer_compressor = compressor(b, n("indexer_compressor"), 4, int(cfg.indexer_dim));
        L.indexer_q_b = b.matrix(n("indexer.attn_q_b.weight"));
        L.indexer_proj = b.matrix(n("indexer.proj.weight"));
    }
    L.hc_ffn_fn = b.matrix(n("hc_ffn_fn.weight"));
    L.hc_ffn_scale = b.f32(n("hc_ffn_scale.weight"));
    L.hc_ffn_base = b.f32(n("hc_ffn_base.weight"));
    L.ffn_norm = b.f32(n("ffn_norm.weight"));
    L.router = b.matrix(n("ffn_gate_inp.weight"));
    if (kind.hash)
        L.tid2eid = reinterpret_cast<const int32_t*>(f.data(b.info(n("ffn_gate_tid2eid.weight"))));
    else
        L.exp_probs_b = b.f32(n("exp_probs_b.bias"));
    L.gate_exps = b.experts(n("ffn_gate_exps.weight"));
    L.up_exps = b.experts(n("ffn_up_exps.weight"));
    L.down_exps = b.experts(n("ffn_down_exps.weight"));
    L.gate_shexp = b.matrix(n("ffn_gate_shexp.weight"));
    L.up_shexp = b.matrix(n("ffn_up_shexp.weight"));
    L.down_shexp = b.matrix(n("ffn_down_shexp.weight"));
    return L;
}

Weights Weights::bind(const gguf::File& f, const ModelConfig& cfg, const model::LayerRange& range) {
    Binder b(f);
    Weights w;
    if (range.embedding()) w.token_embd = b.matrix("token_embd.weight");
    w.layers.resize(cfg.n_layer);
    for (uint32_t il = 0; il < cfg.n_layer; ++il) {
        LayerWeights& L = w.layers[il];
        L.index = int(il);
        L.ratio = int(cfg.compress_ratio(il));
        if (range.contains(il)) L = bind_layer(f, cfg, fmt::format("blk.{}.", il), int(il), LayerKind::of(cfg, il));
    }
    if (!range.output) return w;
    w.output_hc_fn = b.matrix("output_hc_fn.weight");
    w.output_hc_base = b.f32("output_hc_base.weight");
    w.output_hc_scale = b.f32("output_hc_scale.weight");
    w.output_norm = b.f32("output_norm.weight");
    w.output = b.matrix("output.weight");
    return w;
}

}  // namespace ds4::deepseek4
