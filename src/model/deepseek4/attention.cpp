// The attention sublayer (spec/ARCHITECTURE.md §3.3): q low-rank path, the shared KV row, the
// compressors and the lightning indexer, sink attention over raw + compressed rows, inverse
// RoPE and the grouped output projection.
//
// DeepSeek V4's own parts are here (the projections, the KV row, the compressors, which rows a
// token sees); the scheduling over the call's rows (blocks/attention_rounds.h), the indexer's
// top-k row choice (blocks/top_k.h) and the attention kernel (ops/attention.h) are the
// family-neutral blocks.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "common/error.h"
#include "model/blocks/attention_rounds.h"
#include "model/blocks/top_k.h"
#include "model/deepseek4/forward.h"
#include "model/deepseek4/peer_diag.h"
#include "ops/attention.h"
#include "ops/hc.h"
#include "ops/matmul.h"
#include "ops/norm.h"
#include "ops/qat.h"
#include "quant/quant.h"

namespace ds4::deepseek4 {

std::vector<ops::HcMix> hc_pre(const LayerContext& ctx, const ops::Matrix& fn, const float* scale,
                               const float* base, const float* X, int64_t n, float* y) {
    const ModelConfig& c = ctx.cfg;
    const int64_t D = c.n_embd, HCD = c.hc_dim(), M = c.hc_mix();
    ScratchArena& scratch = ctx.ws.arena;
    float* zn = scratch.take(n * HCD);
    float* m = scratch.take(n * M);
    // The mixes see the RMS-normalised flat state; the sum uses the raw streams. One batched
    // product for the chunk (equal to a matvec per token, ops/matmul.h).
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::rms_norm(X + t * HCD, HCD, nullptr, c.norm_eps, &zn[t * HCD]); });
    ops::matmul(fn, zn, n, m, ctx.pool);
    std::vector<ops::HcMix> mixes(static_cast<size_t>(n));
    for_tokens(ctx.pool, n, [&](int64_t t) {
        mixes[size_t(t)] = ops::hc_split(&m[t * M], scale, base, int(c.hc), int(c.sinkhorn_iters), c.hc_eps);
        ops::hc_weighted_sum(X + t * HCD, mixes[size_t(t)].pre.data(), int(c.hc), D, y + t * D);
    });
    return mixes;
}

namespace {

// A compressor's projections of the chunk (k = Wkv a, g = Wg a + APE[p mod r]): buffers and
// products here, run with the sublayer's other products of `a`; add_ape once they are done.
struct CompressorProjection {
    const CompressorWeights* cw = nullptr;
    float* k = nullptr;
    float* g = nullptr;

    void add_products(const CompressorWeights& w, int64_t n, ScratchArena& scratch,
                      std::vector<ops::Product>& products) {
        cw = &w;
        const int64_t row = int64_t(w.coff) * w.width;
        k = scratch.take(n * row);
        g = scratch.take(n * row);
        products.push_back({&w.kv, k});
        products.push_back({&w.gate, g});
    }
    void add_ape(const Rows& rows) const {
        const int64_t row = int64_t(cw->coff) * cw->width;
        for (int64_t t = 0; t < rows.n; ++t) {
            const float* ape = &cw->ape[size_t((rows.pos[size_t(t)] % cw->ratio) * row)];
            for (int64_t j = 0; j < row; ++j) g[t * row + j] += ape[j];
        }
    }
};

// One attention sublayer over the rows of a call: the buffers of its steps (from the arena, in
// this order) and the steps, run in order by attention_sublayer().
class AttentionPass {
public:
    AttentionPass(const LayerContext& ctx, const LayerWeights& w)
        : ctx_(ctx), c_(ctx.cfg), w_(w), R_(ctx.rows), rope_(ctx.model.rope_for_ratio(w.ratio)), n_(ctx.rows.n),
          H_(c_.n_head), Dh_(c_.head_dim), HI_(c_.indexer_heads), DI_(c_.indexer_dim), top_k_(c_.indexer_top_k) {
        // The indexer chooses rows only for a token that sees more than top-k compressed rows
        // (position p: (p + 1) / 4 > top_k, past 2048 tokens on Flash); below that every row
        // is used, so a call where no row is past it skips the indexer's queries and weights
        // (two F16 products: 2.4% of the bytes of a decode step of the 4-layer Flash file). Its
        // compressor still runs: its rows are needed once the context grows.
        for (const Rows::Span& sp : R_.spans) indexer_ = indexer_ || (sp.n > 0 && needs_indexer(sp.p0 + sp.n - 1));
    }

    void project(const float* a);
    void prepare_queries();
    void prepare_kv();
    void prepare_indexer_queries();
    void attend();
    void output(const std::vector<ops::HcMix>& mixes, float* X);
    bool indexer() const { return indexer_; }

private:
    struct Seq {
        LayerState* s;
        bool qat;
    };
    bool needs_indexer(int64_t p) const { return w_.ratio == 4 && (p + 1) / 4 > top_k_; }
    int64_t pos(int64_t t) const { return R_.pos[size_t(t)]; }
    void update_state(const Seq& sq, int64_t t, float* pooled);
    void gather(const LayerState& s, int64_t t, std::vector<const float*>& rows, const std::vector<int32_t>* sel) const;
    void attend_token(const Rows::Span& sp, const LayerState& s, int64_t t, blocks::TokenScratch& scratch,
                      ThreadPool* inner) const;

    const LayerContext& ctx_;
    const ModelConfig& c_;
    const LayerWeights& w_;
    const Rows& R_;
    const ops::Rope& rope_;
    const int64_t n_, H_, Dh_, HI_, DI_, top_k_;
    bool indexer_ = false;
    float *qr_ = nullptr, *qn_ = nullptr, *q_ = nullptr, *kv_ = nullptr, *iq_ = nullptr, *iw_ = nullptr;
    CompressorProjection comp_, index_comp_;
};

// Every product of `a` in one parallel region, for the rows of every sequence: the query's
// first half (§3.3.2), the KV row (§3.3.3), the compressors' projections and the indexer's
// weights.
void AttentionPass::project(const float* a) {
    ScratchArena& scratch = ctx_.ws.arena;
    const int64_t Rq = c_.q_lora_rank;
    qr_ = scratch.take(n_ * Rq);
    qn_ = scratch.take(n_ * Rq);
    q_ = scratch.take(n_ * H_ * Dh_);
    kv_ = scratch.take(n_ * Dh_);
    iq_ = indexer_ ? scratch.take(n_ * HI_ * DI_) : nullptr;
    iw_ = indexer_ ? scratch.take(n_ * HI_) : nullptr;
    std::vector<ops::Product> products = {{&w_.q_a, qr_}, {&w_.kv, kv_}};
    if (w_.ratio != 0) comp_.add_products(w_.compressor, n_, scratch, products);
    if (w_.ratio == 4) index_comp_.add_products(w_.indexer_compressor, n_, scratch, products);
    if (indexer_) products.push_back({&w_.indexer_proj, iw_});
    ops::matmul_shared_input(a, n_, c_.n_embd, products, ctx_.pool);
    if (w_.ratio != 0) comp_.add_ape(R_);
    if (w_.ratio == 4) index_comp_.add_ape(R_);
}

// Query (attention_queries), with the indexer's queries from qn in the same region.
void AttentionPass::prepare_queries() {
    std::vector<ops::Product> more;
    if (indexer_) more.push_back({&w_.indexer_q_b, iq_});
    attention_queries(ctx_, w_, rope_, qr_, n_, R_.pos.data(), qn_, q_, more);
}

// KV row: key and value at once (f16-rounded only under the peer check's kv_f16 switch).
void AttentionPass::prepare_kv() {
    const bool f16 = peer_diag().kv_f16;
    for_tokens(ctx_.pool, n_, [&](int64_t t) {
        attention_kv_row(c_, w_, rope_, &kv_[t * Dh_], pos(t), R_.qat(t));
        if (f16) round_to_f16(&kv_[t * Dh_], Dh_);
    });
}

// The indexer's queries roped (QAT: Hadamard + FP4) and its head weights scaled.
void AttentionPass::prepare_indexer_queries() {
    const float wscale = 1.0f / std::sqrt(float(DI_ * HI_));
    for_tokens(ctx_.pool, n_, [&](int64_t t) {
        rope_.apply(&iq_[t * HI_ * DI_], int(HI_), int(DI_), pos(t));
        if (R_.qat(t))
            for (int64_t h = 0; h < HI_; ++h) {
                ops::hadamard(&iq_[(t * HI_ + h) * DI_], DI_);
                ops::fp4_roundtrip(&iq_[(t * HI_ + h) * DI_], DI_);
            }
        for (int64_t h = 0; h < HI_; ++h) iw_[t * HI_ + h] *= wscale;
    });
}

// Token t's state updates, in position order: its KV row into the raw ring, its projections
// into the compressors (and the rows they complete into the compressed caches).
void AttentionPass::update_state(const Seq& sq, int64_t t, float* pooled) {
    LayerState& s = *sq.s;
    const int64_t p = pos(t), DI = DI_, rope_dim = c_.rope_dim;
    const int64_t crow = int64_t(w_.compressor.coff) * Dh_;  // compressor projection width
    std::memcpy(s.raw_row(p), &kv_[t * Dh_], sizeof(float) * Dh_);
    if (w_.ratio != 0 && s.compressor.push(p, &comp_.k[t * crow], &comp_.g[t * crow], pooled)) {
        float* row = &s.comp[size_t(s.n_comp * Dh_)];
        std::memcpy(row, pooled, sizeof(float) * Dh_);
        finish_compressed_row(row, w_.compressor, rope_, p + 1 - w_.ratio, c_.norm_eps, int(rope_dim),
                              sq.qat ? CompressedRowQat::Fp8Nope : CompressedRowQat::None);
        if (peer_diag().kv_f16) round_to_f16(row, Dh_);
        ++s.n_comp;
    }
    if (w_.ratio == 4 && s.index_compressor.push(p, &index_comp_.k[t * 2 * DI], &index_comp_.g[t * 2 * DI], pooled)) {
        float* row = &s.index_comp[size_t(s.n_index_comp * DI)];
        std::memcpy(row, pooled, sizeof(float) * DI);
        finish_compressed_row(row, w_.indexer_compressor, rope_, p + 1 - 4, c_.norm_eps, int(rope_dim),
                              sq.qat ? CompressedRowQat::HadamardFp4 : CompressedRowQat::None);
        if (peer_diag().kv_f16) round_to_f16(row, DI);
        ++s.n_index_comp;
    }
}

// Rows token t may see: its raw window, then (ratio 128) every compressed row or (ratio 4) all
// of them while they fit top-k, else the indexer's choice `sel`.
void AttentionPass::gather(const LayerState& s, int64_t t, std::vector<const float*>& rows,
                           const std::vector<int32_t>* sel) const {
    const int64_t p = pos(t);
    rows.clear();
    for (int64_t kp = std::max<int64_t>(0, p - s.window + 1); kp <= p; ++kp) rows.push_back(s.raw_row(kp));
    const int64_t n_comp = w_.ratio ? (p + 1) / w_.ratio : 0;
    if (sel) {
        for (int32_t r : *sel) rows.push_back(&s.comp[size_t(r) * Dh_]);
    } else {
        for (int64_t r = 0; r < n_comp; ++r) rows.push_back(&s.comp[size_t(r * Dh_)]);
    }
}

// Token t's attention (its output overwrites its queries, ops/attention.h allows it), with the
// indexer's choice first where it has one; `inner`: the pool, when the token has it alone.
void AttentionPass::attend_token(const Rows::Span& sp, const LayerState& s, int64_t t, blocks::TokenScratch& scratch,
                                 ThreadPool* inner) const {
    const int64_t p = pos(t);
    std::vector<int32_t> sel;
    if (needs_indexer(p)) {
        const blocks::IndexerQuery iq{&iq_[t * HI_ * DI_], &iw_[t * HI_], int(HI_), int(DI_)};
        sel = blocks::select_rows(iq, s.index_comp.data(), (p + 1) / 4, top_k_, scratch.score, inner);
        if (model::DecisionLog* log = ctx_.trunk ? sp.seq->decision_log() : nullptr) {
            auto& per_layer = log->indexer[size_t(p)];
            per_layer.resize(c_.n_layer);
            per_layer[size_t(w_.index)] = sel;
        }
    }
    gather(s, t, scratch.rows, needs_indexer(p) ? &sel : nullptr);
    const ops::AttentionRows rows{scratch.rows.data(), scratch.rows.data(), int64_t(scratch.rows.size()), int(Dh_),
                                  int(Dh_)};
    float* qt = &q_[t * H_ * Dh_];
    blocks::attend_position(qt, int(H_), rows, w_.sinks, 1.0f / std::sqrt(float(Dh_)), qt, inner);
}

// Each sequence's rows in blocks (blocks/attention_rounds.h): a block is as long as the raw
// ring's slack lets its first token still find its window; the whole call when the ring holds
// the whole context. After attention, inverse RoPE of each head's output tail.
void AttentionPass::attend() {
    std::vector<blocks::SequenceBlocks> blocks_of;
    std::vector<Seq> seqs;
    for (const Rows::Span& sp : R_.spans) {
        if (sp.n == 0) continue;
        LayerState& s = ctx_.state(sp, uint32_t(w_.index));
        const int64_t ctx_len = sp.seq->options().ctx;
        const int64_t block = s.raw_slots >= ctx_len ? sp.n : std::max<int64_t>(1, s.raw_slots - s.window + 1);
        blocks_of.push_back({&sp, block});
        seqs.push_back({&s, sp.seq->options().qat});
    }
    std::vector<float> pooled(size_t(std::max<int64_t>(Dh_, DI_)));
    blocks::run_attention_rounds(
        ctx_.pool, blocks_of, [&](int32_t i, int64_t t) { update_state(seqs[size_t(i)], t, pooled.data()); },
        [&](int32_t i, int64_t t, blocks::TokenScratch& scratch, ThreadPool* inner) {
            attend_token(*blocks_of[size_t(i)].span, *seqs[size_t(i)].s, t, scratch, inner);
        },
        [&](int64_t t) { rope_.apply(&q_[t * H_ * Dh_], int(H_), int(Dh_), pos(t), /*inverse=*/true); });
}

void AttentionPass::output(const std::vector<ops::HcMix>& mixes, float* X) {
    attention_output(ctx_, w_, q_, n_, mixes.data(), X);
}

}  // namespace

std::vector<ops::HcMix> attention_input(const LayerContext& ctx, const LayerWeights& w, const float* X, int64_t n,
                                        float* a) {
    const int64_t D = ctx.cfg.n_embd;
    float* y = ctx.ws.arena.take(n * D);
    std::vector<ops::HcMix> mixes = hc_pre(ctx, w.hc_attn_fn, w.hc_attn_scale, w.hc_attn_base, X, n, y);
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::rms_norm(&y[t * D], D, w.attn_norm, ctx.cfg.norm_eps, &a[t * D]); });
    return mixes;
}

void attention_queries(const LayerContext& ctx, const LayerWeights& w, const ops::Rope& rope, const float* qr,
                       int64_t n, const int64_t* pos, float* qn, float* q, std::span<const ops::Product> more) {
    const ModelConfig& c = ctx.cfg;
    const int64_t Rq = c.q_lora_rank, H = c.n_head, Dh = c.head_dim;
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::rms_norm(&qr[t * Rq], Rq, w.q_a_norm, c.norm_eps, &qn[t * Rq]); });
    std::vector<ops::Product> products = {{&w.q_b, q}};
    products.insert(products.end(), more.begin(), more.end());
    ops::matmul_shared_input(qn, n, Rq, products, ctx.pool);
    for_tokens(ctx.pool, n, [&](int64_t t) {
        for (int64_t h = 0; h < H; ++h) {
            float* qh = &q[(t * H + h) * Dh];
            ops::rms_norm(qh, Dh, nullptr, c.norm_eps, qh);
        }
        rope.apply(&q[t * H * Dh], int(H), int(Dh), pos[t]);
    });
}

void attention_kv_row(const ModelConfig& c, const LayerWeights& w, const ops::Rope& rope, float* row, int64_t pos,
                      bool qat) {
    const int64_t Dh = c.head_dim;
    ops::rms_norm(row, Dh, w.kv_norm, c.norm_eps, row);
    rope.apply(row, 1, int(Dh), pos);
    if (qat) ops::fp8_roundtrip(row, Dh - c.rope_dim);
}

// Grouped output (§3.3.8): group g's heads through its own row block of out_a; then hc_post.
void attention_output(const LayerContext& ctx, const LayerWeights& w, const float* o, int64_t n,
                      const ops::HcMix* mixes, float* X) {
    const ModelConfig& c = ctx.cfg;
    const int64_t D = c.n_embd, HCD = c.hc_dim(), H = c.n_head, Dh = c.head_dim;
    const int64_t G = c.o_groups, Ro = c.o_lora_rank, group_in = H / G * Dh;
    if (w.out_a.cols != group_in) fail("internal: out_a has {} columns, a group {}", w.out_a.cols, group_in);
    ScratchArena& scratch = ctx.ws.arena;
    float* z = scratch.take(n * G * Ro);
    float* out = scratch.take(n * D);
    ops::matmul_grouped(w.out_a, G, o, n, z, ctx.pool);
    ops::matmul(w.out_b, z, n, out, ctx.pool);
    const blocks::OutputEdit edit = output_edit(ctx, w, model::Sublayer::Attention);
    for_tokens(ctx.pool, n, [&](int64_t t) {
        if (edit.active()) edit.apply(t, &out[t * D]);
        ops::hc_post(mixes[t], &out[t * D], X + t * HCD, D);
    });
}

void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X) {
    const int64_t n = ctx.rows.n, D = ctx.cfg.n_embd;
    // The sublayer's buffers (hundreds of MB for a long chunk) from the arena (blocks/workspace.h).
    ScratchArena& scratch = ctx.ws.arena;
    scratch.reset();
    float* a = scratch.take(n * D);
    const std::vector<ops::HcMix> mixes = attention_input(ctx, w, X, n, a);

    AttentionPass pass(ctx, w);
    pass.project(a);
    pass.prepare_queries();
    pass.prepare_kv();
    if (pass.indexer()) pass.prepare_indexer_queries();
    pass.attend();
    pass.output(mixes, X);
}

}  // namespace ds4::deepseek4
