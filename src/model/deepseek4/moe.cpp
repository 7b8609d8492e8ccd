// The MoE sublayer (spec/ARCHITECTURE.md §3.5): hash routing (tid2eid) on the first layers, biased
// sqrt-softplus top-k elsewhere, normalised and scaled routing weights, routed experts and the
// shared expert with the asymmetric SwiGLU clamp.
//
// The chunk is grouped by expert: each expert's gate/up/down run once as a matrix product over
// the tokens that chose it, all experts (and the shared one) in one parallel region per
// projection. Every (token, slot) result is what a token-by-token pass computes (ops/matmul.h),
// and each token then sums its expert outputs in its own selection order, then the shared
// expert: the same float operations in the same order, so prefill equals decode bit for bit.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <span>

#include "common/error.h"
#include "model/deepseek4/forward.h"
#include "ops/hc.h"
#include "ops/norm.h"

namespace ds4::deepseek4 {
namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// g <- silu(min(g, clamp)) * clamp(u, -clamp, clamp) over n values; clamp <= 0 disables it.
void swiglu(float* g, const float* u, int64_t n, float clamp) {
    for (int64_t i = 0; i < n; ++i) {
        float gi = g[i], ui = u[i];
        if (clamp > 0.0f) {
            gi = std::min(gi, clamp);  // gate: upper bound only
            ui = std::clamp(ui, -clamp, clamp);
        }
        g[i] = gi / (1.0f + std::exp(-gi)) * ui;
    }
}

// Routing of one token: chosen experts in selection order, their weights, and the selection
// margin (NaN for hash layers).
struct Route {
    std::vector<int32_t> chosen;
    std::vector<float> weight;
    float margin = std::numeric_limits<float>::quiet_NaN();
};

void route_token(const ModelConfig& c, const LayerWeights& w, const float* logits, int32_t token,
                 std::vector<float>& prob, std::vector<int32_t>& order, Route& r) {
    const int64_t E = c.n_expert, K = c.n_expert_used;
    r.chosen.resize(size_t(K));
    r.weight.resize(size_t(K));
    r.margin = std::numeric_limits<float>::quiet_NaN();
    for (int64_t e = 0; e < E; ++e) prob[size_t(e)] = std::sqrt(softplus(logits[e]));
    if (w.tid2eid) {  // hash layer: the token id picks the experts
        for (int64_t k = 0; k < K; ++k) r.chosen[size_t(k)] = w.tid2eid[int64_t(token) * K + k];
    } else {          // biased scores select; ties go to the lower expert id
        std::iota(order.begin(), order.end(), 0);
        auto biased = [&](int32_t e) { return prob[size_t(e)] + w.exp_probs_b[e]; };
        std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
            return biased(a) > biased(b) || (biased(a) == biased(b) && a < b);
        });
        std::copy(order.begin(), order.begin() + K, r.chosen.begin());
        if (K < E) {
            const int32_t next = *std::min_element(order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
                return biased(a) > biased(b);
            });
            r.margin = biased(order[size_t(K - 1)]) - biased(next);
        }
    }
    float sum = 0.0f;
    for (int32_t e : r.chosen) sum += prob[size_t(e)];
    const float norm = c.expert_weights_norm ? 1.0f / std::max(sum, 6.103515625e-5f) : 1.0f;
    for (int64_t k = 0; k < K; ++k)
        r.weight[size_t(k)] = prob[size_t(r.chosen[size_t(k)])] * norm * c.expert_weights_scale;
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
    std::vector<float> prob(static_cast<size_t>(E));
    std::vector<int32_t> order(static_cast<size_t>(E));
    std::vector<uint8_t> chosen(static_cast<size_t>(E), 0);
    Route r;
    for (int64_t t = 0; t < n; ++t) {
        route_token(c, wn, &logits[size_t(t * E)], ctx.rows.token[size_t(t)], prob, order, r);
        for (int32_t e : r.chosen)
            if (e >= 0 && e < E) chosen[size_t(e)] = 1;
    }
    std::vector<int32_t> experts;
    for (int64_t e = 0; e < E; ++e)
        if (chosen[size_t(e)]) experts.push_back(int32_t(e));
    source.hint(next, experts);
}

}  // namespace

void moe_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X) {
    const ModelConfig& c = ctx.cfg;
    const Rows& R = ctx.rows;
    const int64_t n = R.n;
    const int32_t* tokens = R.token.data();
    const int64_t D = c.n_embd, HCD = c.hc_dim(), E = c.n_expert, K = c.n_expert_used;
    Workspace& sc = ctx.ws;
    ScratchArena& scratch = sc.arena;
    scratch.reset();
    float* y = scratch.take(n * D);
    float* v = scratch.take(n * D);
    float* logits = scratch.take(n * E);
    const std::vector<ops::HcMix> mixes =
        hc_pre(ctx, w.hc_ffn_fn, w.hc_ffn_scale, w.hc_ffn_base, X, n, y);
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::rms_norm(&y[t * D], D, w.ffn_norm, c.norm_eps, &v[t * D]); });
    ops::matmul(w.router, v, n, logits, ctx.pool);

    // Routing, row by row; slot t*K+k is row t's k-th chosen expert.
    std::vector<Route> routes(static_cast<size_t>(n));
    ctx.pool.parallel_for(n, [&](int64_t b, int64_t e) {
        std::vector<float> prob(static_cast<size_t>(E));
        std::vector<int32_t> order(static_cast<size_t>(E));
        for (int64_t t = b; t < e; ++t)
            route_token(c, w, &logits[size_t(t * E)], tokens[t], prob, order, routes[size_t(t)]);
    }, 8);
    std::vector<std::vector<int64_t>> slots_of(static_cast<size_t>(E));  // expert -> slots, in token order
    for (int64_t t = 0; t < n; ++t)
        for (int64_t k = 0; k < K; ++k) {
            const int32_t e = routes[size_t(t)].chosen[size_t(k)];
            if (e < 0 || e >= E) fail("layer {}: token {} routed to expert {} of {}", w.index, tokens[t], e, E);
            slots_of[size_t(e)].push_back(t * K + k);
        }

    // The experts the rows chose, announced to the expert source before any of their products,
    // in groups of at most its capacity (one group unless a streaming cache is smaller than
    // the call's distinct experts). Every product's result for a row is independent of the
    // other jobs of its region, so grouping changes no bit.
    std::vector<int32_t> used, used_rows;
    for (int64_t e = 0; e < E; ++e)
        if (!slots_of[size_t(e)].empty()) {
            used.push_back(int32_t(e));
            used_rows.push_back(int32_t(slots_of[size_t(e)].size()));
        }
    model::ExpertSource& source = ctx.model.experts();
    const size_t group = std::max<size_t>(1, source.capacity());
    std::vector<model::ExpertWeights> ew(static_cast<size_t>(E));

    const float clamp_exp = c.swiglu_clamp_exp.at(size_t(w.index));
    const float clamp_sh = c.swiglu_clamp_shexp.empty() ? clamp_exp : c.swiglu_clamp_shexp.at(size_t(w.index));
    const int64_t F = w.gate_exps.rows_per_expert, FS = w.gate_shexp.rows;
    const int64_t S = n * K;  // slots

    // Inputs in the dot types of the routed and the shared gate/up weights.
    const TensorType t_exp = quant::dot_type(w.gate_exps.all.type), t_sh = quant::dot_type(w.gate_shexp.type);
    if (quant::dot_type(w.up_exps.all.type) != t_exp || quant::dot_type(w.up_shexp.type) != t_sh)
        fail("layer {}: gate and up projections take different activation types", w.index);
    sc.v_exp.set(v, n, D, t_exp, &ctx.pool);
    const ops::Activations* v_sh = &sc.v_exp;
    if (t_sh != t_exp) {
        sc.v_sh.set(v, n, D, t_sh, &ctx.pool);
        v_sh = &sc.v_sh;
    }
    const ops::Activations& v_exp = sc.v_exp;

    float* g = scratch.take(S * F);
    float* u = scratch.take(S * F);
    float* gs = scratch.take(n * FS);
    float* us = scratch.take(n * FS);
    const TensorType t_down = quant::dot_type(w.down_exps.all.type), t_down_sh = quant::dot_type(w.down_shexp.type);
    QuantRows& m_exp = sc.m_exp;
    QuantRows& m_sh = sc.m_sh;
    m_exp.resize(S, F, t_down);
    m_sh.resize(n, FS, t_down_sh);
    float* yk = scratch.take(S * D);
    float* ysh = scratch.take(n * D);
    std::vector<const void*> act_ptrs;
    std::vector<float*> out_ptrs;
    act_ptrs.reserve(size_t(2 * S + 2 * n));  // add_job keeps pointers into these: no regrowth
    out_ptrs.reserve(size_t(2 * S + 2 * n));
    std::vector<ops::MatmulJob> jobs;
    auto add_job = [&](const ops::Matrix& W, auto act_of, auto out_of, int64_t count) {
        const size_t a0 = act_ptrs.size();
        for (int64_t i = 0; i < count; ++i) {
            act_ptrs.push_back(act_of(i));
            out_ptrs.push_back(out_of(i));
        }
        jobs.push_back({W, act_ptrs.data() + a0, out_ptrs.data() + a0, count});
    };
    std::vector<int64_t> swiglu_rows;  // slots, then S + t for the shared expert's rows
    for (size_t g0 = 0; g0 < used.size(); g0 += group) {
        const size_t g1 = std::min(used.size(), g0 + group);
        const std::span<const int32_t> in_group(used.data() + g0, g1 - g0);
        const bool first = g0 == 0;  // the shared expert runs with the first group
        source.prepare(uint32_t(w.index), in_group, std::span<const int32_t>(used_rows.data() + g0, g1 - g0));
        for (int32_t e : in_group) ew[size_t(e)] = source.expert(uint32_t(w.index), e);
        // (Not when the layer runs in groups: the forecast's reads would take the slots the
        // next group needs.)
        if (first && used.size() <= group && source.wants_hints()) hint_next_layer(ctx, w, v, source);

        // Gate and up of the group's experts (and of the shared expert), one parallel region.
        jobs.clear();
        act_ptrs.clear();
        out_ptrs.clear();
        swiglu_rows.clear();
        for (int32_t e : in_group) {
            const auto& sl = slots_of[size_t(e)];
            const int64_t m = int64_t(sl.size());
            auto act_of = [&](int64_t i) { return v_exp.row(sl[size_t(i)] / K); };
            add_job(ew[size_t(e)].gate, act_of, [&](int64_t i) { return &g[size_t(sl[size_t(i)] * F)]; }, m);
            add_job(ew[size_t(e)].up, act_of, [&](int64_t i) { return &u[size_t(sl[size_t(i)] * F)]; }, m);
            swiglu_rows.insert(swiglu_rows.end(), sl.begin(), sl.end());
        }
        if (first) {
            add_job(w.gate_shexp, [&](int64_t t) { return v_sh->row(t); }, [&](int64_t t) { return &gs[size_t(t * FS)]; }, n);
            add_job(w.up_shexp, [&](int64_t t) { return v_sh->row(t); }, [&](int64_t t) { return &us[size_t(t * FS)]; }, n);
            for (int64_t t = 0; t < n; ++t) swiglu_rows.push_back(S + t);
        }
        ops::matmul_jobs(jobs.data(), jobs.size(), ctx.pool);

        // SwiGLU, then the inputs of the down projections in their dot type.
        ctx.pool.parallel_for(int64_t(swiglu_rows.size()), [&](int64_t b, int64_t e) {
            for (int64_t j = b; j < e; ++j) {
                const int64_t i = swiglu_rows[size_t(j)];
                if (i < S) {
                    swiglu(&g[size_t(i * F)], &u[size_t(i * F)], F, clamp_exp);
                    quant::quantize_activation(t_down, &g[size_t(i * F)], m_exp.row(i), F);
                } else {
                    const int64_t t = i - S;
                    swiglu(&gs[size_t(t * FS)], &us[size_t(t * FS)], FS, clamp_sh);
                    quant::quantize_activation(t_down_sh, &gs[size_t(t * FS)], m_sh.row(t), FS);
                }
            }
        });  // grain 1: a decode step's 7 rows (~50 us of expf) split over the threads

        // Down projections: routed outputs per slot, shared output per token.
        jobs.clear();
        act_ptrs.clear();
        out_ptrs.clear();
        for (int32_t e : in_group) {
            const auto& sl = slots_of[size_t(e)];
            add_job(ew[size_t(e)].down, [&](int64_t i) { return m_exp.row(sl[size_t(i)]); },
                    [&](int64_t i) { return &yk[size_t(sl[size_t(i)] * D)]; }, int64_t(sl.size()));
        }
        if (first)
            add_job(w.down_shexp, [&](int64_t t) { return m_sh.row(t); }, [&](int64_t t) { return &ysh[size_t(t * D)]; }, n);
        ops::matmul_jobs(jobs.data(), jobs.size(), ctx.pool);
        source.release(uint32_t(w.index));
    }

    // Per token, in its selection order: F = sum_k w_k y_k, plus the shared expert; hc_post.
    ctx.pool.parallel_for(n, [&](int64_t b, int64_t e) {
        std::vector<float> Fv(static_cast<size_t>(D));
        for (int64_t t = b; t < e; ++t) {
            std::fill(Fv.begin(), Fv.end(), 0.0f);
            for (int64_t k = 0; k < K; ++k) {
                const float wk = routes[size_t(t)].weight[size_t(k)];
                const float* yt = &yk[size_t((t * K + k) * D)];
                for (int64_t i = 0; i < D; ++i) Fv[size_t(i)] += wk * yt[i];
            }
            const float* st = &ysh[size_t(t * D)];
            for (int64_t i = 0; i < D; ++i) Fv[size_t(i)] += st[i];
            ops::hc_post(mixes[size_t(t)], Fv.data(), X + t * HCD, D);
        }
    }, 4);

    for (int64_t t = 0; t < n; ++t) {
        model::DecisionLog* log = R.spans[size_t(R.span_of[size_t(t)])].seq->decision_log();
        if (log) {
            const size_t p = size_t(R.pos[size_t(t)]);
            auto& per_layer = log->experts[p];
            per_layer.resize(c.n_layer);
            per_layer[size_t(w.index)] = routes[size_t(t)].chosen;
            auto& margins = log->expert_margin[p];
            margins.resize(c.n_layer, std::numeric_limits<float>::quiet_NaN());
            margins[size_t(w.index)] = routes[size_t(t)].margin;
        }
    }
}

}  // namespace ds4::deepseek4
