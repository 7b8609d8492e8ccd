// The forward pass's internals (private to src/model/deepseek4): what a layer's sublayers see
// of a call (the family-neutral rows and workspace of src/model/blocks, the config, the model)
// and the two sublayers of a block. X is the HC state of the call's rows, [rows][hc][n_embd],
// updated in place.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "model/blocks/rows.h"
#include "model/blocks/steering.h"
#include "model/blocks/workspace.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/sequence.h"
#include "ops/hc.h"
#include "ops/matmul.h"
#include "ops/rope.h"

namespace ds4::deepseek4 {

using blocks::for_tokens;
using blocks::grow;
using blocks::Rows;
using blocks::ScratchArena;
using blocks::Workspace;

// A row's sequence as this family's type (every sequence of a call was checked to be one).
inline Sequence& sequence(const Rows::Span& sp) { return *static_cast<Sequence*>(sp.seq); }
// How a trunk layer finds a row span's state: its sequence's state of that layer.
inline LayerState& trunk_layer_state(const Rows::Span& sp, uint32_t layer) { return sequence(sp).layer(layer); }

// What a block (a trunk layer, or an extra block outside the trunk: extra_block.h) runs with.
// The defaults are the trunk's; an extra block brings its own experts and states, and is not
// a trunk layer (trunk = false): no decision logging (the logs are indexed by trunk layer) and
// no lookahead hint for the trunk's next layer.
struct LayerContext {
    const ModelConfig& cfg;
    const Model& model;
    ThreadPool& pool;
    Workspace& ws;
    const Rows& rows;
    model::ExpertSource& experts = model.experts();
    LayerState& (*state)(const Rows::Span& sp, uint32_t layer) = trunk_layer_state;
    bool trunk = true;
    // The model's directional steering for this call (trunk layers only; null: none).
    const model::Steering* steering = nullptr;
};


void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X);

// The attention sublayer's steps, shared with attentions of another shape (a DSpark stage's
// non-causal block: dspark.cpp), so both run the same arithmetic.
//
// The input (§3.3.1): hc_pre with hc_attn_* (y from the arena), then attn_norm into a
// [n][n_embd]; returns the mixes for hc_post.
std::vector<ops::HcMix> attention_input(const LayerContext& ctx, const LayerWeights& w, const float* X, int64_t n,
                                        float* a);
// The query path (§3.3.2) from qr = q_a·a [n][q_lora_rank]: qn = RMSNorm_{q_a_norm}(qr),
// q = q_b·qn (with the `more` products of qn in the same parallel region), each head
// RMS-normalised and roped at pos[t].
void attention_queries(const LayerContext& ctx, const LayerWeights& w, const ops::Rope& rope, const float* qr,
                       int64_t n, const int64_t* pos, float* qn, float* q, std::span<const ops::Product> more = {});
// The KV row (§3.3.3) from attn_kv·a, in place: RMSNorm_{kv_norm}, RoPE at pos, and (qat) the
// FP8 round trip of the non-rope dims.
void attention_kv_row(const ModelConfig& c, const LayerWeights& w, const ops::Rope& rope, float* row, int64_t pos,
                      bool qat);
// The grouped output projection (§3.3.8) of the heads' outputs o [n][n_head*head_dim], then
// hc_post of row t into X [n][hc][n_embd] with mixes[t]; buffers from the arena.
void attention_output(const LayerContext& ctx, const LayerWeights& w, const float* o, int64_t n,
                      const ops::HcMix* mixes, float* X);
void moe_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X);

// The steering edit / capture of layer w's sublayer outputs (blocks/steering.h): the call's
// steering on trunk layers, nothing on an extra block.
inline blocks::OutputEdit output_edit(const LayerContext& ctx, const LayerWeights& w, model::Sublayer which) {
    return {ctx.trunk ? ctx.steering : nullptr, ctx.rows, which, uint32_t(w.index), ctx.cfg.n_embd};
}

// hc_pre for every row (§3.2): the sublayer inputs y [n][n_embd] and the mixes that hc_post
// needs.
std::vector<ops::HcMix> hc_pre(const LayerContext& ctx, const ops::Matrix& fn, const float* scale,
                               const float* base, const float* X, int64_t n, float* y);

}  // namespace ds4::deepseek4
