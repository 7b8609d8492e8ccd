// The per-ISA kernels behind ops::sink_attention and ops::indexer_scores (internal to src/ops).
// scratch: at least min(n_head, 4) * n_rows floats.
#pragma once

#include <cstdint>

namespace ds4::ops {
namespace avx2 {
void attend_heads(const float* q, int n_head, int head_dim, const float* const* rows,
                  int64_t n_rows, const float* sinks, float scale, float* out, float* scratch);
void indexer_scores(const float* q, const float* weights, int n_head, int dim, const float* keys,
                    int64_t r0, int64_t r1, float* score);
}
namespace avx512 {
void attend_heads(const float* q, int n_head, int head_dim, const float* const* rows,
                  int64_t n_rows, const float* sinks, float scale, float* out, float* scratch);
void indexer_scores(const float* q, const float* weights, int n_head, int dim, const float* keys,
                    int64_t r0, int64_t r1, float* score);
}
}  // namespace ds4::ops
