// GLM 5.2's FFN sublayer: v = RMSNorm_ffn_norm(x), then a dense SwiGLU network (the leading
// layers) or the routed experts (sigmoid scores, exp_probs_b chooses, weights normalised over
// the chosen experts and scaled) plus the shared expert; x += the result. No clamp anywhere.
// The router, the expert executor and the SwiGLU network are the family-neutral blocks.
#include <limits>

#include "model/blocks/expert_observe.h"
#include "model/blocks/routed_ffn.h"
#include "model/blocks/router.h"
#include "model/blocks/swiglu_ffn.h"
#include "model/glm/forward.h"
#include "ops/norm.h"

namespace ds4::glm {
namespace {

void routed(const LayerContext& ctx, const LayerWeights& w, const float* v, float* X) {
    const GlmConfig& c = ctx.cfg;
    const int64_t n = ctx.rows.n, D = c.n_embd, E = c.n_expert;
    ScratchArena& scratch = ctx.ws.arena;
    float* logits = scratch.take(n * E);
    ops::matmul(w.router, v, n, logits, ctx.pool);
    const blocks::Router router({.gating = blocks::Gating::Sigmoid,
                                 .n_expert = E,
                                 .n_used = c.n_expert_used,
                                 .selection_bias = w.exp_probs_b,
                                 .normalize = c.expert_weights_norm,
                                 .scale = c.expert_weights_scale});
    std::vector<blocks::Route> routes(static_cast<size_t>(n));
    ctx.pool.parallel_for(n, [&](int64_t b, int64_t e) {
        blocks::RouterScratch s;
        for (int64_t t = b; t < e; ++t) router.route(&logits[size_t(t * E)], s, routes[size_t(t)]);
    }, 8);
    const blocks::RoutedFfnSpec spec{.layer = uint32_t(w.index),
                                     .n_expert = E,
                                     .n_used = c.n_expert_used,
                                     .n_embd = D,
                                     .ff = w.gate_exps.rows_per_expert,
                                     .gate_type = w.gate_exps.all.type,
                                     .up_type = w.up_exps.all.type,
                                     .down_type = w.down_exps.all.type,
                                     .clamp = 0.0f,
                                     .shared = &w.shared};
    const blocks::ExpertOutputs out =
        blocks::run_routed_experts(spec, v, n, routes, ctx.experts, ctx.pool, scratch, ctx.ws.ffn);
    const blocks::OutputEdit edit = output_edit(ctx, w, model::Sublayer::Ffn);
    blocks::combine_experts(out, routes, ctx.pool, [&](int64_t t, const float* F) {
        if (edit.active()) {
            thread_local std::vector<float> edited;
            edited.assign(F, F + D);
            edit.apply(t, edited.data());
            F = edited.data();
        }
        for (int64_t i = 0; i < D; ++i) X[t * D + i] += F[i];
    });
    if (ctx.trunk) {
        blocks::log_routes(ctx.rows, uint32_t(w.index), c.n_layer, routes);
        blocks::observe_experts(ctx.rows, uint32_t(w.index), E, v, routes, out);
    }
}

}  // namespace

void ffn_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X) {
    const GlmConfig& c = ctx.cfg;
    const int64_t n = ctx.rows.n, D = c.n_embd;
    ScratchArena& scratch = ctx.ws.arena;
    scratch.reset();
    float* v = scratch.take(n * D);
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::rms_norm(X + t * D, D, w.ffn_norm, c.norm_eps, v + t * D); });
    if (!w.dense) return routed(ctx, w, v, X);
    float* y = scratch.take(n * D);
    blocks::swiglu_ffn(w.dense_ffn, v, n, y, ctx.pool, scratch, ctx.ws.ffn);
    const blocks::OutputEdit edit = output_edit(ctx, w, model::Sublayer::Ffn);
    for_tokens(ctx.pool, n, [&](int64_t t) {
        if (edit.active()) edit.apply(t, &y[t * D]);
        for (int64_t i = 0; i < D; ++i) X[t * D + i] += y[t * D + i];
    });
}

}  // namespace ds4::glm
