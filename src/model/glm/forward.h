// The GLM forward pass's internals (private to src/model/glm): what a layer's sublayers see of
// a call, and the two sublayers. X is the residual stream of the call's rows, [rows][n_embd],
// updated in place (x += attention(x), then x += ffn(x)).
#pragma once

#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "model/blocks/rows.h"
#include "model/blocks/steering.h"
#include "model/blocks/workspace.h"
#include "model/glm/model.h"
#include "model/glm/sequence.h"

namespace ds4::glm {

using blocks::for_tokens;
using blocks::grow;
using blocks::Rows;
using blocks::ScratchArena;
using blocks::Workspace;

inline Sequence& sequence(const Rows::Span& sp) { return *static_cast<Sequence*>(sp.seq); }
// How a trunk layer finds a row span's state: its sequence's state of that layer.
inline LayerState& trunk_layer_state(const Rows::Span& sp, uint32_t layer) { return sequence(sp).layer(layer); }

// Each row's key choice of the last full-indexer layer of the call (the shared layers after it
// reuse it): chosen[t] = false while the row sees no more than top-k keys (it attends to all).
struct TopK {
    std::vector<std::vector<int32_t>> rows;  // [rows] ascending positions
    std::vector<uint8_t> chosen;             // [rows]
};

struct LayerContext {
    const GlmConfig& cfg;
    const Model& model;
    ThreadPool& pool;
    Workspace& ws;
    const Rows& rows;
    TopK& top_k;
    model::ExpertSource& experts = model.experts();
    // The defaults are the trunk's; the MTP block (mtp.h) brings its own states and is not a
    // trunk layer (trunk = false: no decision logging, which is indexed by trunk layer).
    LayerState& (*state)(const Rows::Span& sp, uint32_t layer) = trunk_layer_state;
    bool trunk = true;
    // The model's directional steering for this call (trunk layers only; null: none).
    const model::Steering* steering = nullptr;
};

void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X);
void ffn_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X);

// The steering edit / capture of layer w's sublayer outputs (blocks/steering.h): the call's
// steering on trunk layers, nothing on the MTP block.
inline blocks::OutputEdit output_edit(const LayerContext& ctx, const LayerWeights& w, model::Sublayer which) {
    return {ctx.trunk ? ctx.steering : nullptr, ctx.rows, which, uint32_t(w.index), int64_t(ctx.cfg.n_embd)};
}

}  // namespace ds4::glm
