// The MoE sublayer (ARCHITECTURE.md §3.5): hash routing (tid2eid) on the first layers, biased
// sqrt-softplus top-k elsewhere, normalised and scaled routing weights, routed experts and the
// shared expert with the asymmetric SwiGLU clamp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "model/layer.h"
#include "ops/hc.h"
#include "ops/norm.h"

namespace ds4::model {
namespace {

float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// out = down . (silu(min(gate.v, clamp)) * clamp(up.v, -clamp, clamp)); clamp <= 0 disables it.
void swiglu_expert(const LayerContext& ctx, const ops::Matrix& gate, const ops::Matrix& up,
                   const ops::Matrix& down, const float* v, float clamp, std::vector<float>& g,
                   std::vector<float>& u, float* out) {
    g.resize(size_t(gate.rows));
    u.resize(size_t(up.rows));
    ops::matvec(gate, v, g.data(), ctx.pool);
    ops::matvec(up, v, u.data(), ctx.pool);
    for (size_t i = 0; i < g.size(); ++i) {
        float gi = g[i], ui = u[i];
        if (clamp > 0.0f) {
            gi = std::min(gi, clamp);  // gate: upper bound only
            ui = std::clamp(ui, -clamp, clamp);
        }
        g[i] = gi / (1.0f + std::exp(-gi)) * ui;
    }
    ops::matvec(down, g.data(), out, ctx.pool);
}

}  // namespace

void moe_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X,
                  const int32_t* tokens, int64_t n, int64_t p0) {
    const ModelConfig& c = ctx.cfg;
    const int64_t D = c.n_embd, HCD = c.hc_dim(), E = c.n_expert, K = c.n_expert_used;
    std::vector<float> y(size_t(n * D)), v(size_t(n * D)), logits(size_t(n * E));
    const std::vector<ops::HcMix> mixes =
        hc_pre(ctx, w.hc_ffn_fn, w.hc_ffn_scale, w.hc_ffn_base, X, n, y.data());
    for (int64_t t = 0; t < n; ++t) ops::rms_norm(&y[t * D], D, w.ffn_norm, c.norm_eps, &v[t * D]);
    ops::matmul(w.router, v.data(), n, logits.data(), ctx.pool);

    const float clamp_exp = c.swiglu_clamp_exp.at(size_t(w.index));
    const float clamp_sh = c.swiglu_clamp_shexp.empty() ? clamp_exp : c.swiglu_clamp_shexp.at(size_t(w.index));
    std::vector<float> prob(static_cast<size_t>(E)), F(static_cast<size_t>(D)), yk(static_cast<size_t>(D)), g, u;
    std::vector<int32_t> chosen(static_cast<size_t>(K)), order(static_cast<size_t>(E));
    for (int64_t t = 0; t < n; ++t) {
        float margin = std::numeric_limits<float>::quiet_NaN();
        for (int64_t e = 0; e < E; ++e) prob[size_t(e)] = std::sqrt(softplus(logits[size_t(t * E + e)]));
        if (w.tid2eid) {  // hash layer: the token id picks the experts
            for (int64_t k = 0; k < K; ++k) chosen[size_t(k)] = w.tid2eid[int64_t(tokens[t]) * K + k];
        } else {          // biased scores select; ties go to the lower expert id
            std::iota(order.begin(), order.end(), 0);
            auto biased = [&](int32_t e) { return prob[size_t(e)] + w.exp_probs_b[e]; };
            std::partial_sort(order.begin(), order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
                return biased(a) > biased(b) || (biased(a) == biased(b) && a < b);
            });
            std::copy(order.begin(), order.begin() + K, chosen.begin());
            if (K < E) {
                const int32_t next = *std::min_element(order.begin() + K, order.end(), [&](int32_t a, int32_t b) {
                    return biased(a) > biased(b);
                });
                margin = biased(order[size_t(K - 1)]) - biased(next);
            }
        }
        float sum = 0.0f;
        for (int32_t e : chosen) sum += prob[size_t(e)];
        const float norm = c.expert_weights_norm ? 1.0f / std::max(sum, 6.103515625e-5f) : 1.0f;

        const float* vt = &v[t * D];
        std::fill(F.begin(), F.end(), 0.0f);
        for (int32_t e : chosen) {
            swiglu_expert(ctx, w.gate_exps.expert(e), w.up_exps.expert(e), w.down_exps.expert(e),
                          vt, clamp_exp, g, u, yk.data());
            const float wk = prob[size_t(e)] * norm * c.expert_weights_scale;
            for (int64_t i = 0; i < D; ++i) F[size_t(i)] += wk * yk[size_t(i)];
        }
        swiglu_expert(ctx, w.gate_shexp, w.up_shexp, w.down_shexp, vt, clamp_sh, g, u, yk.data());
        for (int64_t i = 0; i < D; ++i) F[size_t(i)] += yk[size_t(i)];
        ops::hc_post(mixes[size_t(t)], F.data(), X + t * HCD, D);
        if (ctx.log) {
            auto& per_layer = ctx.log->experts[size_t(p0 + t)];
            per_layer.resize(c.n_layer);
            per_layer[size_t(w.index)] = chosen;
            auto& margins = ctx.log->expert_margin[size_t(p0 + t)];
            margins.resize(c.n_layer, std::numeric_limits<float>::quiet_NaN());
            margins[size_t(w.index)] = margin;
        }
    }
}

}  // namespace ds4::model
