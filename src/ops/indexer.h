// Lightning-indexer scores (spec/ARCHITECTURE.md §3.3.5): how much one query position wants each
// compressed indexer row, score[r] = sum_h weight[h] * relu(q_h . key_r), over the rows a
// ratio-4 layer's top-k then chooses from.
#pragma once

#include <cstdint>

#include "quant/quant.h"

namespace ds4::ops {

//   q:       [n_head][dim]   the position's indexer queries
//   weights: [n_head]        the per-head weights (already scaled)
//   keys:    [rows][dim]     compressed indexer rows, contiguous
//   score:   written at [r0, r1)
// The best kernel of `isa` (AVX-512, AVX2; scalar reference otherwise). Each (row, head) dot
// runs over dim in order as one fused multiply-add chain, so it is the same in every kernel;
// only the order of the head sum differs between ISAs. For one ISA a row's score depends on
// nothing else (not on r0, r1 or the thread).
void indexer_scores(const float* q, const float* weights, int n_head, int dim, const float* keys,
                    int64_t r0, int64_t r1, float* score, quant::Isa isa = quant::best_isa());
// The scalar reference: heads in order, each dot a fused multiply-add chain.
void indexer_scores_reference(const float* q, const float* weights, int n_head, int dim,
                              const float* keys, int64_t r0, int64_t r1, float* score);

}  // namespace ds4::ops
