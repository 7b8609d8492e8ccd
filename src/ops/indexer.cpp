#include "ops/indexer.h"

#include <algorithm>
#include <cmath>

#include "ops/attention_kernels.h"

namespace ds4::ops {

void indexer_scores_reference(const float* q, const float* weights, int n_head, int dim,
                              const float* keys, int64_t r0, int64_t r1, float* score) {
    for (int64_t r = r0; r < r1; ++r) {
        const float* k = keys + r * dim;
        float s = 0.0f;
        for (int h = 0; h < n_head; ++h) {
            const float* qh = q + int64_t(h) * dim;
            float dot = 0.0f;
            for (int d = 0; d < dim; ++d) dot = std::fma(qh[d], k[d], dot);
            s = std::fma(weights[h], std::max(0.0f, dot), s);
        }
        score[r] = s;
    }
}

void indexer_scores(const float* q, const float* weights, int n_head, int dim, const float* keys,
                    int64_t r0, int64_t r1, float* score, quant::Isa isa) {
    if (r1 <= r0) return;
    if (isa == quant::Isa::Avx512Vnni)
        avx512::indexer_scores(q, weights, n_head, dim, keys, r0, r1, score);
    else if (isa == quant::Isa::Avx2)
        avx2::indexer_scores(q, weights, n_head, dim, keys, r0, r1, score);
    else
        indexer_scores_reference(q, weights, n_head, dim, keys, r0, r1, score);
}

}  // namespace ds4::ops
