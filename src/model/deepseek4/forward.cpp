// The forward pass (spec/ARCHITECTURE.md §3, §3.7; docs/ARCHITECTURE.md): embedding and
// HC expansion, then per layer the attention sublayer (attention.cpp) and the MoE sublayer
// (moe.cpp), then the HC output head.
//
// The rows of a call (one or several sequences) move through each layer together: matrix
// products run over all rows at once, reading each weight once, while the per-token state
// updates (raw window, compressors, indexer) run per sequence in position order, so every
// token sees exactly what token-by-token decoding of its sequence alone would show it (§4.3).
// Every row's arithmetic is independent of the other rows (ops/matmul.h), so a sequence's
// results do not depend on what else is in the batch.
#include <algorithm>
#include <cstring>

#include "common/error.h"
#include "model/blocks/batch_check.h"
#include "model/blocks/hidden_out.h"
#include "model/deepseek4/forward.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/sequence.h"
#include "ops/hc.h"
#include "ops/norm.h"
#include "quant/quant.h"

namespace ds4::deepseek4 {

void Model::check(model::Batch b, bool advancing) const {
    blocks::check_batch(b, cfg_.n_vocab, advancing, [this](const model::Sequence& s) {
        const auto* seq = dynamic_cast<const Sequence*>(&s);
        return seq && &seq->owner() == this;
    });
    blocks::check_draft_outputs(b, info_.range);
}

void Model::embed(model::Batch b, float* hidden) {
    if (!info_.range.embedding()) fail("embed: this model holds layers {}, not the embedding", info_.range.str());
    check(b, false);
    std::lock_guard lock(mu_);
    embed_unlocked(b, hidden);
}

void Model::eval_layers(model::Batch b, float* hidden) {
    check(b, true);
    std::lock_guard lock(mu_);
    layers_unlocked(b, hidden);
}

void Model::head(model::Batch b, const float* hidden) {
    if (!info_.range.output) fail("head: this model holds layers {}, not the output head", info_.range.str());
    check(b, false);
    std::lock_guard lock(mu_);
    head_unlocked(b, hidden);
}

void Model::eval(model::Batch b) {
    if (!info_.range.whole(cfg_.n_layer))
        fail("eval: this model holds layers {} only; run embed/eval_layers/head", info_.range.str());
    check(b, true);
    std::lock_guard lock(mu_);
    float* X = grow(ws_->X, model::batch_rows(b) * int64_t(cfg_.hc_dim()));
    embed_unlocked(b, X);
    layers_unlocked(b, X);
    blocks::write_hidden(b, X, int64_t(cfg_.hc_dim()));
    head_unlocked(b, X);
}

// HC state [rows][HC][D]: every stream starts as the token's embedding (§3.1).
void Model::embed_unlocked(model::Batch b, float* X) {
    const int64_t D = cfg_.n_embd, HC = cfg_.hc;
    int64_t r = 0;
    for (const model::BatchItem& it : b)
        for (int32_t tok : it.tokens) {
            float* x = X + r++ * HC * D;
            quant::dequantize_row(w_.token_embd.type, w_.token_embd.row(tok), x, D);
            for (int64_t k = 1; k < HC; ++k) std::memcpy(x + k * D, x, sizeof(float) * D);
        }
}

void Model::layers_unlocked(model::Batch b, float* X) {
    const Rows rows(b);
    for (const Rows::Span& sp : rows.spans)
        if (model::DecisionLog* log = sp.seq->decision_log()) {
            const size_t end = size_t(sp.p0 + sp.n);
            if (log->experts.size() < end) log->experts.resize(end);
            if (log->indexer.size() < end) log->indexer.resize(end);
            if (log->expert_margin.size() < end) log->expert_margin.resize(end);
        }
    LayerContext ctx{cfg_, *this, pool(), *ws_, rows};
    const std::shared_ptr<const model::Steering> steering = this->steering();
    ctx.steering = steering.get();
    const bool capturing = blocks::wants_draft_outputs(b);
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) {
        attention_sublayer(ctx, w_.layers[il], X);
        moe_sublayer(ctx, w_.layers[il], X);
        if (capturing) blocks::write_captures(b, il, X, int64_t(cfg_.hc_dim()));
    }
    for (const model::BatchItem& it : b) static_cast<Sequence*>(it.seq)->append_tokens(it.tokens);
}

// Output head (§3.6) for the rows that want logits: the HC streams weighted into one, the
// final norm, the vocabulary projection; all rows' products at once.
void Model::head_unlocked(model::Batch b, const float* X) {
    const int64_t D = cfg_.n_embd, HC = cfg_.hc, V = cfg_.n_vocab;
    std::vector<const float*> in;  // rows wanted
    std::vector<float*> out;       // their logits
    int64_t r = 0;
    for (const model::BatchItem& it : b) {
        const int64_t n = int64_t(it.tokens.size());
        if (it.want == model::Logits::All)
            for (int64_t t = 0; t < n; ++t) {
                in.push_back(X + (r + t) * HC * D);
                out.push_back(it.logits + t * V);
            }
        else if (it.want == model::Logits::Last) {
            in.push_back(X + (r + n - 1) * HC * D);
            out.push_back(it.logits);
        }
        r += n;
    }
    head_rows(head_weights(), in, out);
}

HeadWeights Model::head_weights() const {
    return {w_.output_hc_fn, w_.output_hc_base, w_.output_hc_scale, w_.output_norm, w_.output};
}

void Model::head_rows(const HeadWeights& h, std::span<const float* const> in, std::span<float* const> out,
                      float* normed) {
    const int64_t D = cfg_.n_embd, HC = cfg_.hc;
    const int64_t k = int64_t(in.size());
    if (k == 0) return;
    ScratchArena& scratch = ws_->arena;
    scratch.reset();
    float* zn = scratch.take(k * HC * D);
    float* m = scratch.take(k * HC);
    float* yn = scratch.take(k * D);
    for_tokens(pool(), k, [&](int64_t t) { ops::rms_norm(in[size_t(t)], HC * D, nullptr, cfg_.norm_eps, zn + t * HC * D); });
    ops::matmul(h.hc_fn, zn, k, m, pool());
    for_tokens(pool(), k, [&](int64_t t) {
        const std::vector<float> a = ops::hc_head_weights(m + t * HC, h.hc_scale[0], h.hc_base, int(HC), cfg_.hc_eps);
        std::vector<float> y(static_cast<size_t>(D));
        ops::hc_weighted_sum(in[size_t(t)], a.data(), int(HC), D, y.data());
        ops::rms_norm(y.data(), D, h.norm, cfg_.norm_eps, yn + t * D);
    });
    if (normed) std::memcpy(normed, yn, sizeof(float) * size_t(k * D));
    ops::Activations& act = ws_->head_in;
    act.set(yn, k, D, quant::dot_type(h.output.type), &pool());
    std::vector<const void*> act_rows(static_cast<size_t>(k));
    for (int64_t t = 0; t < k; ++t) act_rows[size_t(t)] = act.row(t);
    const ops::MatmulJob job{h.output, act_rows.data(), out.data(), k};
    ops::matmul_jobs(&job, 1, pool());
}

}  // namespace ds4::deepseek4
