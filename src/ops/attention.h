// Attention core with a per-head sink (spec/ARCHITECTURE.md §3.3.7): one query position, n_head
// heads, over a set of shared key/value rows (MQA: one KV vector per row is both key and value).
#pragma once

#include <cstdint>

#include "quant/quant.h"

namespace ds4::ops {

// out[h][d] = sum_s softmax_s(q_h . row_s * scale | sink_h) row_s[d], where the sink logit
// joins the softmax denominator only.
//   q:    [n_head][head_dim]
//   rows: n_rows pointers to [head_dim] vectors
//   sinks:[n_head] raw logits
//   out:  [n_head][head_dim]; may be q itself (every kernel reads a head's query before it
//         writes that head's output, and no other head's)
// The best kernel of `isa` (AVX-512, AVX2; scalar reference otherwise). Results differ from
// the reference only by float summation order; for one ISA they depend on nothing else (not
// on how heads or positions are split over threads).
void sink_attention(const float* q, int n_head, int head_dim, const float* const* rows,
                    int64_t n_rows, const float* sinks, float scale, float* out,
                    quant::Isa isa = quant::best_isa());
// The scalar reference, one head at a time.
void sink_attention_reference(const float* q, int n_head, int head_dim, const float* const* rows,
                              int64_t n_rows, const float* sinks, float scale, float* out);

}  // namespace ds4::ops
