// The GLM forward pass: the token embedding, per layer the attention sublayer (attention.cpp)
// and the FFN sublayer (ffn.cpp), then RMSNorm_output_norm and the vocabulary projection.
//
// As in the deepseek4 family, the rows of a call move through each layer together (products
// over all rows, reading each weight once) while the state updates run per sequence in position
// order, so each sequence's results equal evaluating it alone (model/model.h).
#include <cstring>

#include "common/error.h"
#include "model/blocks/batch_check.h"
#include "model/blocks/hidden_out.h"
#include "model/glm/forward.h"
#include "ops/norm.h"
#include "quant/quant.h"

namespace ds4::glm {

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
    float* X = grow(ws_->X, model::batch_rows(b) * int64_t(cfg_.n_embd));
    embed_unlocked(b, X);
    layers_unlocked(b, X);
    blocks::write_hidden(b, X, int64_t(cfg_.n_embd));
    head_unlocked(b, X);
}

void Model::embed_unlocked(model::Batch b, float* X) {
    const int64_t D = cfg_.n_embd;
    int64_t r = 0;
    for (const model::BatchItem& it : b)
        for (int32_t tok : it.tokens) quant::dequantize_row(w_.token_embd.type, w_.token_embd.row(tok), X + r++ * D, D);
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
    TopK top_k;
    top_k.rows.resize(size_t(rows.n));
    top_k.chosen.assign(size_t(rows.n), 0);
    LayerContext ctx{cfg_, *this, pool(), *ws_, rows, top_k};
    const std::shared_ptr<const model::Steering> steering = this->steering();
    ctx.steering = steering.get();
    const bool capturing = blocks::wants_draft_outputs(b);
    for (uint32_t il = info_.range.first; il <= info_.range.last; ++il) {
        attention_sublayer(ctx, w_.layers[il], X);
        ffn_sublayer(ctx, w_.layers[il], X);
        if (capturing) blocks::write_captures(b, il, X, int64_t(cfg_.n_embd));
    }
    for (const model::BatchItem& it : b) static_cast<Sequence*>(it.seq)->append_tokens(it.tokens);
}

void Model::head_unlocked(model::Batch b, const float* X) {
    const int64_t D = cfg_.n_embd, V = cfg_.n_vocab;
    std::vector<const float*> in;
    std::vector<float*> out;
    int64_t r = 0;
    for (const model::BatchItem& it : b) {
        const int64_t n = int64_t(it.tokens.size());
        if (it.want == model::Logits::All)
            for (int64_t t = 0; t < n; ++t) {
                in.push_back(X + (r + t) * D);
                out.push_back(it.logits + t * V);
            }
        else if (it.want == model::Logits::Last) {
            in.push_back(X + (r + n - 1) * D);
            out.push_back(it.logits);
        }
        r += n;
    }
    const int64_t k = int64_t(in.size());
    if (k == 0) return;
    ScratchArena& scratch = ws_->arena;
    scratch.reset();
    float* yn = scratch.take(k * D);
    for_tokens(pool(), k, [&](int64_t t) { ops::rms_norm(in[size_t(t)], D, w_.output_norm, cfg_.norm_eps, yn + t * D); });
    ops::Activations& act = ws_->head_in;
    act.set(yn, k, D, quant::dot_type(w_.output.type), &pool());
    std::vector<const void*> act_rows(static_cast<size_t>(k));
    for (int64_t t = 0; t < k; ++t) act_rows[size_t(t)] = act.row(t);
    const ops::MatmulJob job{w_.output, act_rows.data(), out.data(), k};
    ops::matmul_jobs(&job, 1, pool());
}

}  // namespace ds4::glm
