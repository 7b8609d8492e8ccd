#include "model/blocks/top_k.h"

#include <algorithm>
#include <numeric>

#include "ops/indexer.h"

namespace ds4::blocks {

void rank_top_k(std::span<const float> score, int64_t k, std::vector<int32_t>& order) {
    order.resize(score.size());
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
        return score[size_t(a)] > score[size_t(b)] || (score[size_t(a)] == score[size_t(b)] && a < b);
    });
}

std::vector<int32_t> top_k_rows(std::span<const float> score, int64_t k) {
    std::vector<int32_t> idx;
    rank_top_k(score, k, idx);
    idx.resize(size_t(k));
    std::sort(idx.begin(), idx.end());
    return idx;
}

std::vector<int32_t> select_rows(const IndexerQuery& q, const float* keys, int64_t n_rows, int64_t k,
                                 std::vector<float>& score, ThreadPool* pool) {
    score.assign(size_t(n_rows), 0.0f);
    if (pool)
        pool->parallel_for(n_rows, [&](int64_t r0, int64_t r1) {
            ops::indexer_scores(q.q, q.weights, q.heads, q.dim, keys, r0, r1, score.data());
        }, 16);
    else
        ops::indexer_scores(q.q, q.weights, q.heads, q.dim, keys, 0, n_rows, score.data());
    return top_k_rows(score, k);
}

}  // namespace ds4::blocks
