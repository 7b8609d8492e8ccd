// The per-ISA sink attention kernels behind ops::sink_attention (internal to src/ops).
// scratch: at least min(n_head, 4) * n_rows floats.
#pragma once

#include <cstdint>

namespace ds4::ops {
namespace avx2 {
void attend_heads(const float* q, int n_head, int head_dim, const float* const* rows,
                  int64_t n_rows, const float* sinks, float scale, float* out, float* scratch);
}
namespace avx512 {
void attend_heads(const float* q, int n_head, int head_dim, const float* const* rows,
                  int64_t n_rows, const float* sinks, float scale, float* out, float* scratch);
}
}  // namespace ds4::ops
