// GLM 5.2's attention sublayer: absorbed MLA with the DSA indexer's key choice.
//
//   a  = RMSNorm_attn_norm(x)
//   qr = RMSNorm_q_a_norm(q_a a);  q = q_b qr: H heads of [nope | rope], the rope part roped at p
//   kv = kv_a a = [c | k_pe]: the latent row is [RMSNorm_kv_a_norm(c) | RoPE(k_pe)] (stored)
//   per head h: Q_h = [k_b_h q_nope_h | q_rope_h] (k_b_h: [kv_lora][nope], the absorption of
//   the key's up-projection), keys = the latent rows, values = their first kv_lora values,
//   scale 1/sqrt(nope + rope), softmax without a sink; o_h = v_b_h (attention output) [v_head];
//   x += attn_output [o_0 .. o_{H-1}].
// Indexer (layers that compute their own choice): k_I = LayerNorm(attn_k a) roped on its FIRST
// rope dims (stored), q_I = attn_q_b qr (H_I heads, same rope), w = proj a / sqrt(D_I H_I);
// score[s] = sum_h w_h relu(q_I,h . k_I,s) over the positions s <= p; when more than top-k are
// visible the token attends only to the top-k (ties: lower position). llama.cpp rotates q_I and
// k_I by one orthonormal Hadamard matrix first; it cancels in q_I . k_I, so it is left out here.
// A shared layer attends to the choice of the last full layer before it, for the same token.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/blocks/attention_rounds.h"
#include "model/blocks/top_k.h"
#include "model/glm/forward.h"
#include "ops/attention.h"
#include "ops/matmul.h"
#include "ops/norm.h"

namespace ds4::glm {
namespace {

class AttentionPass {
public:
    AttentionPass(const LayerContext& ctx, const LayerWeights& w)
        : ctx_(ctx), c_(ctx.cfg), w_(w), R_(ctx.rows), n_(ctx.rows.n), H_(c_.n_head), nope_(c_.qk_nope_dim),
          Dr_(c_.rope_dim), Rkv_(c_.kv_lora_rank), K_(c_.key_dim()), Dq_(c_.q_head_dim()), HI_(c_.indexer_heads),
          DI_(c_.indexer_dim) {}

    void project(const float* x);
    void prepare();
    void attend();
    void output(float* X);

private:
    int64_t pos(int64_t t) const { return R_.pos[size_t(t)]; }
    void update_state(LayerState& s, int64_t t) const;
    void attend_token(const Rows::Span& sp, const LayerState& s, int64_t t, blocks::TokenScratch& scratch,
                      ThreadPool* inner);

    const LayerContext& ctx_;
    const GlmConfig& c_;
    const LayerWeights& w_;
    const Rows& R_;
    const int64_t n_, H_, nope_, Dr_, Rkv_, K_, Dq_, HI_, DI_;
    float *a_ = nullptr, *qr_ = nullptr, *q_ = nullptr, *kv_ = nullptr, *Q_ = nullptr, *o_ = nullptr;
    float *ik_ = nullptr, *iq_ = nullptr, *iw_ = nullptr;
};

// The products of the normed input in one region: q_a, kv_a and the indexer's key and weights.
void AttentionPass::project(const float* x) {
    ScratchArena& scratch = ctx_.ws.arena;
    const int64_t D = c_.n_embd, Rq = c_.q_lora_rank;
    a_ = scratch.take(n_ * D);
    for_tokens(ctx_.pool, n_, [&](int64_t t) { ops::rms_norm(x + t * D, D, w_.attn_norm, c_.norm_eps, a_ + t * D); });
    qr_ = scratch.take(n_ * Rq);
    kv_ = scratch.take(n_ * K_);
    std::vector<ops::Product> products = {{&w_.q_a, qr_}, {&w_.kv_a, kv_}};
    if (w_.full_indexer) {
        ik_ = scratch.take(n_ * DI_);
        iw_ = scratch.take(n_ * HI_);
        products.push_back({&w_.idx_k, ik_});
        products.push_back({&w_.idx_proj, iw_});
    }
    ops::matmul_shared_input(a_, n_, D, products, ctx_.pool);
    // The query's second half (and the indexer's queries) from the normed qr.
    for_tokens(ctx_.pool, n_, [&](int64_t t) { ops::rms_norm(qr_ + t * Rq, Rq, w_.q_a_norm, c_.norm_eps, qr_ + t * Rq); });
    q_ = scratch.take(n_ * H_ * Dq_);
    std::vector<ops::Product> second = {{&w_.q_b, q_}};
    if (w_.full_indexer) {
        iq_ = scratch.take(n_ * HI_ * DI_);
        second.push_back({&w_.idx_q_b, iq_});
    }
    ops::matmul_shared_input(qr_, n_, Rq, second, ctx_.pool);
}

// RoPE, the latent rows, the absorbed queries and the indexer's rows.
void AttentionPass::prepare() {
    ScratchArena& scratch = ctx_.ws.arena;
    const ops::Rope& rope = ctx_.model.rope();
    float* q_nope = scratch.take(n_ * H_ * nope_);
    for_tokens(ctx_.pool, n_, [&](int64_t t) {
        float* qt = q_ + t * H_ * Dq_;
        rope.apply(qt, int(H_), int(Dq_), pos(t));
        for (int64_t h = 0; h < H_; ++h) std::memcpy(q_nope + (t * H_ + h) * nope_, qt + h * Dq_, sizeof(float) * nope_);
        float* kv = kv_ + t * K_;
        ops::rms_norm(kv, Rkv_, w_.kv_a_norm, c_.norm_eps, kv);
        rope.apply(kv, 1, int(K_), pos(t));
        if (w_.full_indexer) {
            float* ik = ik_ + t * DI_;
            ops::layer_norm(ik, DI_, w_.idx_k_norm, w_.idx_k_norm_b, c_.layer_norm_eps, ik);
            rope.apply_leading(ik, 1, int(DI_), pos(t));
            rope.apply_leading(iq_ + t * HI_ * DI_, int(HI_), int(DI_), pos(t));
            const float wscale = 1.0f / std::sqrt(float(DI_ * HI_));
            for (int64_t h = 0; h < HI_; ++h) iw_[t * HI_ + h] *= wscale;
        }
    });
    // Absorption: head h's nope query through its block of k_b, [kv_lora] per head.
    float* qa = scratch.take(n_ * H_ * Rkv_);
    ops::matmul_grouped(w_.k_b, H_, q_nope, n_, qa, ctx_.pool);
    Q_ = scratch.take(n_ * H_ * K_);
    for_tokens(ctx_.pool, n_, [&](int64_t t) {
        for (int64_t h = 0; h < H_; ++h) {
            float* Qh = Q_ + (t * H_ + h) * K_;
            std::memcpy(Qh, qa + (t * H_ + h) * Rkv_, sizeof(float) * Rkv_);
            std::memcpy(Qh + Rkv_, q_ + (t * H_ + h) * Dq_ + nope_, sizeof(float) * Dr_);
        }
    });
    o_ = scratch.take(n_ * H_ * Rkv_);
}

void AttentionPass::update_state(LayerState& s, int64_t t) const {
    std::memcpy(s.kv_row(pos(t)), kv_ + t * K_, sizeof(float) * K_);
    if (w_.full_indexer) std::memcpy(s.index_row(pos(t)), ik_ + t * DI_, sizeof(float) * DI_);
}

void AttentionPass::attend_token(const Rows::Span& sp, const LayerState& s, int64_t t,
                                 blocks::TokenScratch& scratch, ThreadPool* inner) {
    const int64_t p = pos(t), visible = p + 1;
    TopK& choice = ctx_.top_k;
    if (w_.full_indexer) {
        choice.chosen[size_t(t)] = visible > int64_t(c_.indexer_top_k);
        if (choice.chosen[size_t(t)]) {
            const blocks::IndexerQuery iq{iq_ + t * HI_ * DI_, iw_ + t * HI_, int(HI_), int(DI_)};
            choice.rows[size_t(t)] =
                blocks::select_rows(iq, s.index.data(), visible, int64_t(c_.indexer_top_k), scratch.score, inner);
            if (model::DecisionLog* log = ctx_.trunk ? sp.seq->decision_log() : nullptr) {
                auto& per_layer = log->indexer[size_t(p)];
                per_layer.resize(c_.n_layer);
                per_layer[size_t(w_.index)] = choice.rows[size_t(t)];
            }
        }
    }
    scratch.rows.clear();
    if (choice.chosen[size_t(t)])
        for (int32_t r : choice.rows[size_t(t)]) scratch.rows.push_back(s.kv_row(r));
    else
        for (int64_t r = 0; r < visible; ++r) scratch.rows.push_back(s.kv_row(r));
    const ops::AttentionRows rows{scratch.rows.data(), scratch.rows.data(), int64_t(scratch.rows.size()), int(K_),
                                  int(Rkv_)};
    blocks::attend_position(Q_ + t * H_ * K_, int(H_), rows, nullptr, 1.0f / std::sqrt(float(Dq_)),
                            o_ + t * H_ * Rkv_, inner);
}

// Every position's latent row is kept, so a sequence's rows go in one block: all state updates
// first (in position order), then every token's attention.
void AttentionPass::attend() {
    std::vector<blocks::SequenceBlocks> blocks_of;
    std::vector<LayerState*> states;
    for (const Rows::Span& sp : R_.spans) {
        if (sp.n == 0) continue;
        blocks_of.push_back({&sp, sp.n});
        states.push_back(&ctx_.state(sp, uint32_t(w_.index)));
    }
    blocks::run_attention_rounds(
        ctx_.pool, blocks_of, [&](int32_t i, int64_t t) { update_state(*states[size_t(i)], t); },
        [&](int32_t i, int64_t t, blocks::TokenScratch& scratch, ThreadPool* inner) {
            attend_token(*blocks_of[size_t(i)].span, *states[size_t(i)], t, scratch, inner);
        },
        [](int64_t) {});
}

// Per head through its block of v_b, then the output projection, added to the stream.
void AttentionPass::output(float* X) {
    ScratchArena& scratch = ctx_.ws.arena;
    const int64_t D = c_.n_embd, Dv = c_.v_head_dim;
    float* ov = scratch.take(n_ * H_ * Dv);
    float* y = scratch.take(n_ * D);
    ops::matmul_grouped(w_.v_b, H_, o_, n_, ov, ctx_.pool);
    ops::matmul(w_.out, ov, n_, y, ctx_.pool);
    const blocks::OutputEdit edit = output_edit(ctx_, w_, model::Sublayer::Attention);
    for_tokens(ctx_.pool, n_, [&](int64_t t) {
        if (edit.active()) edit.apply(t, &y[t * D]);
        for (int64_t i = 0; i < D; ++i) X[t * D + i] += y[t * D + i];
    });
}

}  // namespace

void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X) {
    ctx.ws.arena.reset();
    AttentionPass pass(ctx, w);
    pass.project(X);
    pass.prepare();
    pass.attend();
    pass.output(X);
}

}  // namespace ds4::glm
