// How an attention sublayer's per-token work runs over the rows of a call (family-neutral).
//
// Each sequence's rows go in blocks: first, in position order, each token's state updates
// (KV ring, compressors, caches: update), then attention for the block in parallel, each token
// over exactly the rows it may see (attend), then a per-token step after attention (finish,
// e.g. inverse RoPE). A block is as long as the sequence's KV ring allows (its first token must
// still find its window). Round k takes block k of every sequence, so the decode rows of many
// sequences attend in one parallel region.
//
// Within a round, the tokens are handed out latest first within a sequence: a token's cost
// grows with its position, so the last tasks to go out are the cheapest. With at least as many
// tokens as threads, each token is one task (attend gets no pool: it runs on its thread);
// with fewer (decode), the tokens run one after another, each with the whole pool (attend may
// split its rows or heads over it). Either way a token's results do not depend on the split.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "model/blocks/rows.h"
#include "ops/attention.h"

namespace ds4::blocks {

// One sequence of the call and its block length.
struct SequenceBlocks {
    const Rows::Span* span;
    int64_t size;  // rows per block (>= 1)
};

// A worker's scratch, reused from token to token.
struct TokenScratch {
    std::vector<const float*> rows;  // the rows a token attends to
    std::vector<float> score;        // indexer scores
};

// update(i, t): row t of seqs[i], in position order on the calling thread.
// attend(i, t, TokenScratch&, ThreadPool* inner): attention of row t; inner is the pool when the
//     token has it to itself, else null.
// finish(t): after every token of the round has attended, rows split over the pool.
template <class Update, class Attend, class Finish>
void run_attention_rounds(ThreadPool& pool, std::span<const SequenceBlocks> seqs, Update&& update,
                          Attend&& attend, Finish&& finish) {
    int64_t rounds = 0;
    for (const SequenceBlocks& b : seqs) rounds = std::max(rounds, (b.span->n + b.size - 1) / b.size);
    struct Task {
        int32_t seq;
        int64_t t;  // row
    };
    std::vector<Task> tasks;
    for (int64_t round = 0; round < rounds; ++round) {
        tasks.clear();
        for (size_t i = 0; i < seqs.size(); ++i) {
            const Rows::Span& sp = *seqs[i].span;
            const int64_t r0 = sp.row0 + round * seqs[i].size;
            const int64_t r1 = std::min(sp.row0 + sp.n, r0 + seqs[i].size);
            for (int64_t t = r0; t < r1; ++t) update(int32_t(i), t);
            for (int64_t t = r1 - 1; t >= r0; --t) tasks.push_back({int32_t(i), t});
        }
        const int64_t m = int64_t(tasks.size());
        if (m >= pool.size()) {
            // Many tokens: one per task, handed out one at a time.
            std::atomic<int64_t> next{0};
            pool.parallel_for(pool.size(), [&](int64_t, int64_t) {
                TokenScratch scratch;
                for (int64_t k = next.fetch_add(1, std::memory_order_relaxed); k < m;
                     k = next.fetch_add(1, std::memory_order_relaxed))
                    attend(tasks[size_t(k)].seq, tasks[size_t(k)].t, scratch, static_cast<ThreadPool*>(nullptr));
            });
        } else {
            // Few tokens (decode): one at a time, each over the whole pool.
            TokenScratch scratch;
            for (int64_t k = m - 1; k >= 0; --k) attend(tasks[size_t(k)].seq, tasks[size_t(k)].t, scratch, &pool);
        }
        pool.parallel_for(m, [&](int64_t i0, int64_t i1) {
            for (int64_t k = i0; k < i1; ++k) finish(tasks[size_t(k)].t);
        });
    }
}

// Attention of one position's n_head heads over `rows` (ops::attention); with a pool, the heads
// are split over it (in runs of 4), else computed on the calling thread. sinks may be null.
// out may be q when value_dim == key_dim (with a pool and narrower values, one thread's output
// could land on another's queries).
inline void attend_position(const float* q, int n_head, const ops::AttentionRows& rows, const float* sinks,
                            float scale, float* out, ThreadPool* pool) {
    auto heads = [&](int64_t h0, int64_t h1) {
        ops::attention(q + h0 * rows.key_dim, int(h1 - h0), rows, sinks ? sinks + h0 : nullptr, scale,
                       out + h0 * rows.value_dim);
    };
    if (pool) pool->parallel_for(n_head, heads, 4);
    else heads(0, n_head);
}

}  // namespace ds4::blocks
