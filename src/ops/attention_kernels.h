// The per-ISA kernels behind ops::attention and ops::indexer_scores (internal to src/ops).
// scratch: at least n_head * (n_rows + 1) floats; rows.n_rows >= 1.
#pragma once

#include <cstdint>

#include "ops/attention.h"

namespace ds4::ops {
namespace avx2 {
void attend_heads(const float* q, int n_head, const AttentionRows& rows, const float* sinks, float scale,
                  float* out, float* scratch);
void indexer_scores(const float* q, const float* weights, int n_head, int dim, const float* keys,
                    int64_t r0, int64_t r1, float* score);
}
namespace avx512 {
void attend_heads(const float* q, int n_head, const AttentionRows& rows, const float* sinks, float scale,
                  float* out, float* scratch);
void indexer_scores(const float* q, const float* weights, int n_head, int dim, const float* keys,
                    int64_t r0, int64_t r1, float* score);
}
}  // namespace ds4::ops
