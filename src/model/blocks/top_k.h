// Top-k selection (family-neutral): the k best of a score vector with ties to the lower index,
// as a router's expert choice and an indexer's row choice use it, and the indexer's row
// selector itself (score every visible row, keep the top k).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/thread_pool.h"

namespace ds4::blocks {

// order[0..k): the indices of the k highest scores, best first, equal scores by lower index
// (order is resized to score.size(); the rest of it is unspecified). 1 <= k <= score.size().
void rank_top_k(std::span<const float> score, int64_t k, std::vector<int32_t>& order);

// The k highest-scoring indices (ties: lower index first), ascending. 1 <= k <= score.size().
std::vector<int32_t> top_k_rows(std::span<const float> score, int64_t k);

// A query of a lightning/DSA-style indexer (ops/indexer.h): score[r] = sum_h weight[h] *
// relu(q_h . key_r) over rows of `dim` floats.
struct IndexerQuery {
    const float* q = nullptr;        // [heads][dim]
    const float* weights = nullptr;  // [heads], already scaled
    int heads = 0, dim = 0;
};

// The k rows of keys[0 .. n_rows) ([n_rows][dim], contiguous) the query wants most, ascending
// (top_k_rows of the scores); k < n_rows. `score` is the caller's scratch (n_rows floats
// after). With a pool, the scores are computed over row ranges split over it (one position
// alone, e.g. a decode step); without, on the calling thread. Either way a row's score is the
// same (ops::indexer_scores depends on nothing but the row).
std::vector<int32_t> select_rows(const IndexerQuery& q, const float* keys, int64_t n_rows, int64_t k,
                                 std::vector<float>& score, ThreadPool* pool = nullptr);

}  // namespace ds4::blocks
