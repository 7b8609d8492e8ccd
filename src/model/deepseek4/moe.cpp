// The MoE sublayer (spec/ARCHITECTURE.md §3.5): hash routing (tid2eid) on the first layers, biased
// sqrt-softplus top-k elsewhere, normalised and scaled routing weights, routed experts and the
// shared expert with the asymmetric SwiGLU clamp.
//
// What is DeepSeek V4's own is here: the router's parameters, hash routing, the lookahead
// forecast and hc_pre/hc_post around the FFN. The routing arithmetic (blocks/router.h) and the
// expert products (blocks/routed_ffn.h: grouped by expert, per-row sums in selection order, so
// prefill equals decode bit for bit) are the family-neutral blocks.
#include <cmath>
#include <functional>
#include <limits>

#include "common/error.h"
#include "model/blocks/expert_observe.h"
#include "model/blocks/routed_ffn.h"
#include "model/blocks/router.h"
#include "model/deepseek4/forward.h"
#include "model/deepseek4/peer_diag.h"
#include "ops/hc.h"
#include "ops/norm.h"

namespace ds4::deepseek4 {
namespace {

// sqrt(softplus) scores, exp_probs_b chooses (hash layers: tid2eid), normalised weights times
// expert_weights_scale.
blocks::Router router_of(const ModelConfig& c, const LayerWeights& w) {
    return blocks::Router({.gating = blocks::Gating::SqrtSoftplus,
                           .n_expert = c.n_expert,
                           .n_used = c.n_expert_used,
                           .selection_bias = w.exp_probs_b,
                           .normalize = c.expert_weights_norm,
                           .scale = c.expert_weights_scale});
}

// Routing of one token: a hash layer's experts are tid2eid[token] (margin NaN), the others the
// router's biased top-k; the router weighs them either way.
void route_token(const blocks::Router& router, const LayerWeights& w, const float* logits, int32_t token,
                 blocks::RouterScratch& s, blocks::Route& r) {
    const int64_t K = router.params().n_used;
    s.prob.resize(size_t(router.params().n_expert));
    router.score(logits, s.prob.data());
    if (w.tid2eid) {
        const int32_t* ids = &w.tid2eid[int64_t(token) * K];
        r.chosen.assign(ids, ids + K);
        r.margin = std::numeric_limits<float>::quiet_NaN();
    } else {
        router.select(s.prob.data(), s, r);
    }
    router.weigh(s.prob.data(), r);
}

// Decode lookahead for a streaming expert source: the experts the next layer will probably
// choose, so their reads overlap this layer's products and the next layer's attention. A hash
// layer's choice is exact (the token ids); elsewhere the next layer's router is applied to this
// layer's normalised FFN input `v`, a forecast that is good when the residual stream changes
// little from one layer to the next (the source measures how good and may ignore it). Only for
// calls with few routes (decode steps): a prompt chunk's layer reads its experts in bulk.
void hint_next_layer(const LayerContext& ctx, const LayerWeights& w, const float* v, model::ExpertSource& source) {
    const ModelConfig& c = ctx.cfg;
    const int64_t n = ctx.rows.n, E = c.n_expert, K = c.n_expert_used;
    const uint32_t next = uint32_t(w.index) + 1;
    if (next > ctx.model.info().range.last || n * K > E) return;
    const LayerWeights& wn = ctx.model.weights().layers[next];
    std::vector<float> logits(static_cast<size_t>(n * E));
    if (!wn.tid2eid) ops::matmul(wn.router, v, n, logits.data(), ctx.pool);
    const blocks::Router router = router_of(c, wn);
    blocks::RouterScratch s;
    std::vector<uint8_t> chosen(static_cast<size_t>(E), 0);
    blocks::Route r;
    for (int64_t t = 0; t < n; ++t) {
        route_token(router, wn, &logits[size_t(t * E)], ctx.rows.token[size_t(t)], s, r);
        for (int32_t e : r.chosen)
            if (e >= 0 && e < E) chosen[size_t(e)] = 1;
    }
    std::vector<int32_t> experts;
    for (int64_t e = 0; e < E; ++e)
        if (chosen[size_t(e)]) experts.push_back(int32_t(e));
    source.hint(next, experts);
}

// The routed-expert products' description for the executor.
blocks::RoutedFfnSpec expert_spec(const ModelConfig& c, const LayerWeights& w, const blocks::SwigluWeights& shared) {
    return {.layer = uint32_t(w.index),
            .n_expert = c.n_expert,
            .n_used = c.n_expert_used,
            .n_embd = c.n_embd,
            .ff = w.gate_exps.rows_per_expert,
            .gate_type = w.gate_exps.all.type,
            .up_type = w.up_exps.all.type,
            .down_type = w.down_exps.all.type,
            .clamp = c.swiglu_clamp_exp.at(size_t(w.index)),
            .shared = &shared};
}

}  // namespace

void moe_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X) {
    const ModelConfig& c = ctx.cfg;
    const int64_t n = ctx.rows.n;
    const int64_t D = c.n_embd, HCD = c.hc_dim(), E = c.n_expert;
    ScratchArena& scratch = ctx.ws.arena;
    scratch.reset();
    float* y = scratch.take(n * D);
    float* v = scratch.take(n * D);
    float* logits = scratch.take(n * E);
    const std::vector<ops::HcMix> mixes =
        hc_pre(ctx, w.hc_ffn_fn, w.hc_ffn_scale, w.hc_ffn_base, X, n, y);
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::rms_norm(&y[t * D], D, w.ffn_norm, c.norm_eps, &v[t * D]); });
    ops::matmul(w.router, v, n, logits, ctx.pool);
    if (peer_diag().router_f32 && w.router.type == TensorType::F16)  // the peer check's switch
        matmul_f16_f32_act(w.router.data, w.router.row_bytes, E, D, v, n, logits);

    // Routing, row by row; slot t*K+k is row t's k-th chosen expert.
    const blocks::Router router = router_of(c, w);
    std::vector<blocks::Route> routes(static_cast<size_t>(n));
    ctx.pool.parallel_for(n, [&](int64_t b, int64_t e) {
        blocks::RouterScratch s;
        for (int64_t t = b; t < e; ++t)
            route_token(router, w, &logits[size_t(t * E)], ctx.rows.token[size_t(t)], s, routes[size_t(t)]);
    }, 8);

    // The routed experts and the shared one (its clamp defaults to the routed experts').
    const float clamp_exp = c.swiglu_clamp_exp.at(size_t(w.index));
    const blocks::SwigluWeights shared{w.gate_shexp, w.up_shexp, w.down_shexp,
                                       c.swiglu_clamp_shexp.empty() ? clamp_exp
                                                                    : c.swiglu_clamp_shexp.at(size_t(w.index))};
    model::ExpertSource& source = ctx.experts;
    std::function<void()> hint;  // the trunk's next layer (an extra block has none)
    if (ctx.trunk) hint = [&] { hint_next_layer(ctx, w, v, source); };
    const blocks::ExpertOutputs out =
        blocks::run_routed_experts(expert_spec(c, w, shared), v, n, routes, source, ctx.pool, scratch, ctx.ws.ffn,
                                   hint);

    // Per token, in its selection order: F = sum_k w_k y_k, plus the shared expert; hc_post.
    const blocks::OutputEdit edit = output_edit(ctx, w, model::Sublayer::Ffn);
    blocks::combine_experts(out, routes, ctx.pool, [&](int64_t t, const float* F) {
        if (!edit.active()) return ops::hc_post(mixes[size_t(t)], F, X + t * HCD, D);
        thread_local std::vector<float> edited;
        edited.assign(F, F + D);
        edit.apply(t, edited.data());
        ops::hc_post(mixes[size_t(t)], edited.data(), X + t * HCD, D);
    });
    if (ctx.trunk) {
        blocks::log_routes(ctx.rows, uint32_t(w.index), c.n_layer, routes);
        blocks::observe_experts(ctx.rows, uint32_t(w.index), E, v, routes, out);
    }
}

}  // namespace ds4::deepseek4
