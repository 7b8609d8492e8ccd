// The attention sublayer (spec/ARCHITECTURE.md §3.3): q low-rank path, the shared KV row, the
// compressors and the lightning indexer, sink attention over raw + compressed rows, inverse
// RoPE and the grouped output projection.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <numeric>

#include "common/error.h"
#include "model/deepseek4/forward.h"
#include "ops/attention.h"
#include "ops/hc.h"
#include "ops/indexer.h"
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

// Indexer scores (§3.3.5) of compressed rows [r0, r1) for one query.
void indexer_scores(const ModelConfig& c, const float* q, const float* weights, const float* keys,
                    int64_t r0, int64_t r1, float* score) {
    ops::indexer_scores(q, weights, int(c.indexer_heads), int(c.indexer_dim), keys, r0, r1, score);
}

// The top-k rows by score (ties: lower index first), ascending.
std::vector<int32_t> top_rows(const std::vector<float>& score, int64_t k) {
    std::vector<int32_t> idx(score.size());
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), [&](int32_t a, int32_t b) {
        return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
    });
    idx.resize(size_t(k));
    std::sort(idx.begin(), idx.end());
    return idx;
}

}  // namespace

void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X) {
    const ModelConfig& c = ctx.cfg;
    const Rows& R = ctx.rows;
    const int64_t n = R.n;
    const int64_t D = c.n_embd, HCD = c.hc_dim(), H = c.n_head, Dh = c.head_dim;
    const int64_t Rq = c.q_lora_rank, rope_dim = c.rope_dim, nope = Dh - rope_dim;
    const ops::Rope& rope = ctx.model.rope(uint32_t(w.index));
    auto pos = [&](int64_t t) { return R.pos[size_t(t)]; };

    // The sublayer's buffers (hundreds of MB for a long chunk) from the arena (forward.h).
    ScratchArena& scratch = ctx.ws.arena;
    scratch.reset();
    float* y = scratch.take(n * D);
    float* a = scratch.take(n * D);
    const std::vector<ops::HcMix> mixes =
        hc_pre(ctx, w.hc_attn_fn, w.hc_attn_scale, w.hc_attn_base, X, n, y);
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::rms_norm(&y[t * D], D, w.attn_norm, c.norm_eps, &a[t * D]); });

    // Every product of `a` in one parallel region, for the rows of every sequence: the query's
    // first half (§3.3.2), the KV row (§3.3.3), the compressors' projections and the indexer's
    // weights. The indexer chooses rows only for a token that sees more than top-k compressed
    // rows (position p: (p + 1) / 4 > top_k, past 2048 tokens on Flash); below that every row
    // is used, so a call where no row is past it skips the indexer's queries and weights (two
    // F16 products: 2.4% of the bytes of a decode step of the 4-layer Flash file). Its
    // compressor still runs: its rows are needed once the context grows.
    const int64_t HI = c.indexer_heads, DI = c.indexer_dim;
    const int64_t top_k = c.indexer_top_k;
    auto needs_indexer = [&](int64_t p) { return w.ratio == 4 && (p + 1) / 4 > top_k; };
    bool indexer = false;
    for (const Rows::Span& sp : R.spans) indexer = indexer || (sp.n > 0 && needs_indexer(sp.p0 + sp.n - 1));
    float* qr = scratch.take(n * Rq);
    float* qn = scratch.take(n * Rq);
    float* q = scratch.take(n * H * Dh);
    float* kv = scratch.take(n * Dh);
    float* iq = indexer ? scratch.take(n * HI * DI) : nullptr;
    float* iw = indexer ? scratch.take(n * HI) : nullptr;
    CompressorProjection comp, index_comp;
    std::vector<ops::Product> products = {{&w.q_a, qr}, {&w.kv, kv}};
    if (w.ratio != 0) comp.add_products(w.compressor, n, scratch, products);
    if (w.ratio == 4) index_comp.add_products(w.indexer_compressor, n, scratch, products);
    if (indexer) products.push_back({&w.indexer_proj, iw});
    ops::matmul_shared_input(a, n, D, products, ctx.pool);
    if (w.ratio != 0) comp.add_ape(R);
    if (w.ratio == 4) index_comp.add_ape(R);

    // Query: qr -> qn (kept for the indexer) -> q, per-head RMS, RoPE; the indexer's queries
    // from qn in the same region.
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::rms_norm(&qr[t * Rq], Rq, w.q_a_norm, c.norm_eps, &qn[t * Rq]); });
    products = {{&w.q_b, q}};
    if (indexer) products.push_back({&w.indexer_q_b, iq});
    ops::matmul_shared_input(qn, n, Rq, products, ctx.pool);
    for_tokens(ctx.pool, n, [&](int64_t t) {
        for (int64_t h = 0; h < H; ++h) {
            float* qh = &q[(t * H + h) * Dh];
            ops::rms_norm(qh, Dh, nullptr, c.norm_eps, qh);
        }
        rope.apply(&q[t * H * Dh], int(H), int(Dh), pos(t));
    });

    // KV row: key and value at once.
    for_tokens(ctx.pool, n, [&](int64_t t) {
        float* row = &kv[t * Dh];
        ops::rms_norm(row, Dh, w.kv_norm, c.norm_eps, row);
        rope.apply(row, 1, int(Dh), pos(t));
        if (R.qat(t)) ops::fp8_roundtrip(row, nope);
    });
    float *ck = comp.k, *cg = comp.g, *ik = index_comp.k, *ig = index_comp.g;

    if (indexer) {
        const float wscale = 1.0f / std::sqrt(float(DI * HI));
        for_tokens(ctx.pool, n, [&](int64_t t) {
            rope.apply(&iq[t * HI * DI], int(HI), int(DI), pos(t));
            if (R.qat(t))
                for (int64_t h = 0; h < HI; ++h) {
                    ops::hadamard(&iq[(t * HI + h) * DI], DI);
                    ops::fp4_roundtrip(&iq[(t * HI + h) * DI], DI);
                }
            for (int64_t h = 0; h < HI; ++h) iw[t * HI + h] *= wscale;
        });
    }

    // Each sequence's rows go in blocks: first, in position order, each token's state updates
    // (raw ring, compressors); then attention for the block in parallel, each token over
    // exactly the rows it may see (compressed rows are append-only; the raw ring keeps enough
    // slack that the block's first token still finds its window, which bounds the block size).
    // Round k takes block k of every sequence, so the decode rows of many sequences attend in
    // one parallel region. Each token's output overwrites its queries (ops/attention.h allows
    // it): the call's largest buffer once less (268 MB at 2048 tokens of the Flash shape).
    float* o = q;
    const float scale = 1.0f / std::sqrt(float(Dh));
    const int64_t crow = int64_t(w.compressor.coff) * Dh;  // compressor projection width
    struct Block {
        const Rows::Span* span;
        LayerState* s;
        int64_t size;  // rows per block of this sequence
    };
    std::vector<Block> seqs;
    int64_t rounds = 0;
    for (const Rows::Span& sp : R.spans) {
        if (sp.n == 0) continue;
        LayerState& s = sp.seq->layer(uint32_t(w.index));
        const int64_t ctx_len = sp.seq->options().ctx;
        const int64_t block = s.raw_slots >= ctx_len ? sp.n : std::max<int64_t>(1, s.raw_slots - s.window + 1);
        seqs.push_back({&sp, &s, block});
        rounds = std::max(rounds, (sp.n + block - 1) / block);
    }

    // Rows token t of sequence `b` may see: its raw window, then (ratio 128) every compressed
    // row or (ratio 4) all of them while they fit top-k, else the indexer's choice.
    auto gather = [&](const Block& b, int64_t t, std::vector<const float*>& rows, const std::vector<int32_t>* sel) {
        const LayerState& s = *b.s;
        const int64_t p = pos(t);
        rows.clear();
        for (int64_t kp = std::max<int64_t>(0, p - s.window + 1); kp <= p; ++kp) rows.push_back(s.raw_row(kp));
        const int64_t n_comp = w.ratio ? (p + 1) / w.ratio : 0;
        if (sel) {
            for (int32_t r : *sel) rows.push_back(&s.comp[size_t(r) * Dh]);
        } else {
            for (int64_t r = 0; r < n_comp; ++r) rows.push_back(&s.comp[size_t(r * Dh)]);
        }
    };
    auto log_selection = [&](const Block& b, int64_t p, const std::vector<int32_t>& sel) {
        model::DecisionLog* log = b.span->seq->decision_log();
        if (!log) return;
        auto& per_layer = log->indexer[size_t(p)];
        per_layer.resize(c.n_layer);
        per_layer[size_t(w.index)] = sel;
    };
    auto attend = [&](int64_t t, const std::vector<const float*>& rows, int64_t h0, int64_t h1) {
        ops::sink_attention(&q[(t * H + h0) * Dh], int(h1 - h0), int(Dh), rows.data(),
                            int64_t(rows.size()), w.sinks + h0, scale, &o[(t * H + h0) * Dh]);
    };

    std::vector<float> pooled(size_t(std::max<int64_t>(Dh, DI)));
    struct Task {
        const Block* b;
        int64_t t;  // row
    };
    std::vector<Task> tasks;
    for (int64_t round = 0; round < rounds; ++round) {
        tasks.clear();
        for (const Block& b : seqs) {
            const Rows::Span& sp = *b.span;
            const int64_t r0 = sp.row0 + round * b.size;
            const int64_t r1 = std::min(sp.row0 + sp.n, r0 + b.size);
            LayerState& s = *b.s;
            const bool qat = sp.seq->options().qat;
            for (int64_t t = r0; t < r1; ++t) {
                const int64_t p = pos(t);
                std::memcpy(s.raw_row(p), &kv[t * Dh], sizeof(float) * Dh);
                if (w.ratio != 0 && s.compressor.push(p, &ck[t * crow], &cg[t * crow], pooled.data())) {
                    float* row = &s.comp[size_t(s.n_comp * Dh)];
                    std::memcpy(row, pooled.data(), sizeof(float) * Dh);
                    finish_compressed_row(row, w.compressor, rope, p + 1 - w.ratio, c.norm_eps,
                                          int(rope_dim), qat ? CompressedRowQat::Fp8Nope : CompressedRowQat::None);
                    ++s.n_comp;
                }
                if (w.ratio == 4 && s.index_compressor.push(p, &ik[t * 2 * DI], &ig[t * 2 * DI], pooled.data())) {
                    float* row = &s.index_comp[size_t(s.n_index_comp * DI)];
                    std::memcpy(row, pooled.data(), sizeof(float) * DI);
                    finish_compressed_row(row, w.indexer_compressor, rope, p + 1 - 4, c.norm_eps,
                                          int(rope_dim), qat ? CompressedRowQat::HadamardFp4 : CompressedRowQat::None);
                    ++s.n_index_comp;
                }
            }
            // Latest first within a sequence: a token's cost grows with its position (more
            // compressed rows, and the indexer over all of them); handed out in this order,
            // the last tasks to go out are the cheapest.
            for (int64_t t = r1 - 1; t >= r0; --t) tasks.push_back({&b, t});
        }
        const int64_t m = int64_t(tasks.size());

        if (m >= ctx.pool.size()) {
            // Many tokens: one token per task, each with its own indexer choice, handed out
            // one at a time.
            std::atomic<int64_t> next{0};
            ctx.pool.parallel_for(ctx.pool.size(), [&](int64_t, int64_t) {
                std::vector<const float*> rows;
                std::vector<float> score;
                for (int64_t k = next.fetch_add(1, std::memory_order_relaxed); k < m;
                     k = next.fetch_add(1, std::memory_order_relaxed)) {
                    const Block& b = *tasks[size_t(k)].b;
                    const int64_t t = tasks[size_t(k)].t, p = pos(t);
                    std::vector<int32_t> sel;
                    if (needs_indexer(p)) {
                        score.assign(size_t((p + 1) / 4), 0.0f);
                        indexer_scores(c, &iq[t * HI * DI], &iw[t * HI], b.s->index_comp.data(), 0,
                                       int64_t(score.size()), score.data());
                        sel = top_rows(score, top_k);
                        log_selection(b, p, sel);
                    }
                    gather(b, t, rows, needs_indexer(p) ? &sel : nullptr);
                    attend(t, rows, 0, H);
                }
            });
        } else {
            // Few tokens (decode): the indexer over row ranges, then the heads, in parallel.
            std::vector<const float*> rows;
            std::vector<float> score;
            for (int64_t k = m - 1; k >= 0; --k) {
                const Block& b = *tasks[size_t(k)].b;
                const int64_t t = tasks[size_t(k)].t, p = pos(t);
                std::vector<int32_t> sel;
                if (needs_indexer(p)) {
                    score.assign(size_t((p + 1) / 4), 0.0f);
                    ctx.pool.parallel_for(int64_t(score.size()), [&](int64_t r0, int64_t r1) {
                        indexer_scores(c, &iq[t * HI * DI], &iw[t * HI], b.s->index_comp.data(), r0, r1,
                                       score.data());
                    }, 16);
                    sel = top_rows(score, top_k);
                    log_selection(b, p, sel);
                }
                gather(b, t, rows, needs_indexer(p) ? &sel : nullptr);
                ctx.pool.parallel_for(H, [&](int64_t h0, int64_t h1) { attend(t, rows, h0, h1); }, 4);
            }
        }
        ctx.pool.parallel_for(m, [&](int64_t i0, int64_t i1) {
            for (int64_t k = i0; k < i1; ++k) {
                const int64_t t = tasks[size_t(k)].t;
                rope.apply(&o[t * H * Dh], int(H), int(Dh), pos(t), /*inverse=*/true);
            }
        });
    }

    // Grouped output (§3.3.8): group g's heads through its own row block of out_a.
    const int64_t G = c.o_groups, Ro = c.o_lora_rank, group_in = H / G * Dh;
    if (w.out_a.cols != group_in) fail("internal: out_a has {} columns, a group {}", w.out_a.cols, group_in);
    float* z = scratch.take(n * G * Ro);
    float* out = scratch.take(n * D);
    ops::matmul_grouped(w.out_a, G, o, n, z, ctx.pool);
    ops::matmul(w.out_b, z, n, out, ctx.pool);
    for_tokens(ctx.pool, n, [&](int64_t t) { ops::hc_post(mixes[size_t(t)], &out[t * D], X + t * HCD, D); });
}

}  // namespace ds4::deepseek4
