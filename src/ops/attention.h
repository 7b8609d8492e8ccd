// Attention core for one query position (spec/ARCHITECTURE.md §3.3.7): n_head heads over a set
// of key/value rows that all heads share (MQA: one KV vector per row is both key and value;
// absorbed MLA: the value is the first value_dim floats of the key's latent row), with or
// without a per-head learned sink logit in the softmax denominator.
#pragma once

#include <cstdint>

#include "quant/quant.h"

namespace ds4::ops {

// The rows one position attends to. keys[s] and values[s] point to row s's key ([key_dim])
// and value ([value_dim]); values may be keys itself (shared rows) and value_dim may differ
// from key_dim (e.g. 576-wide MLA keys over 512-wide latent values).
struct AttentionRows {
    const float* const* keys = nullptr;
    const float* const* values = nullptr;
    int64_t n_rows = 0;
    int key_dim = 0, value_dim = 0;
};

// out[h][d] = sum_s softmax_s(q_h . key_s * scale | sink_h) value_s[d], where the sink logit
// (when sinks is not null) joins the softmax denominator only.
//   q:     [n_head][key_dim]
//   sinks: [n_head] raw logits, or null: a plain softmax (no rows then gives zeros)
//   out:   [n_head][value_dim]; may be q itself when value_dim <= key_dim (every kernel reads
//          a head's query before it writes that head's output, and no later head's query
//          lies below it)
// The best kernel of `isa` (AVX-512, AVX2; scalar reference otherwise). Results differ from
// the reference only by float summation order; for one ISA they depend on nothing else (not
// on how heads or positions are split over threads).
void attention(const float* q, int n_head, const AttentionRows& rows, const float* sinks, float scale,
               float* out, quant::Isa isa = quant::best_isa());
// The scalar reference, one head at a time.
void attention_reference(const float* q, int n_head, const AttentionRows& rows, const float* sinks,
                         float scale, float* out);

// Shared rows of head_dim (keys = values) with sinks: DeepSeek V4's sink attention.
//   rows: n_rows pointers to [head_dim] vectors; sinks: [n_head]; out may be q.
void sink_attention(const float* q, int n_head, int head_dim, const float* const* rows,
                    int64_t n_rows, const float* sinks, float scale, float* out,
                    quant::Isa isa = quant::best_isa());
void sink_attention_reference(const float* q, int n_head, int head_dim, const float* const* rows,
                              int64_t n_rows, const float* sinks, float scale, float* out);

}  // namespace ds4::ops
