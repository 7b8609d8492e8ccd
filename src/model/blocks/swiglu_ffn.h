// The SwiGLU feed-forward network (family-neutral): y = down(silu(gate x) * up x), with an
// optional clamp (DeepSeek V4: the gate bounded above, up clamped both ways). Used for the
// shared expert of a routed FFN (blocks/routed_ffn.h) and as a dense FFN (e.g. GLM 5's leading
// dense layers).
#pragma once

#include <cstdint>

#include "common/thread_pool.h"
#include "model/blocks/workspace.h"
#include "ops/matmul.h"

namespace ds4::blocks {

// g <- silu(min(g, clamp)) * clamp(u, -clamp, clamp) over n values; clamp <= 0 disables it.
void swiglu(float* g, const float* u, int64_t n, float clamp);

// One SwiGLU network: gate and up [ff][n_embd], down [n_embd][ff]. gate and up must take the
// same activation type (quant::dot_type).
struct SwigluWeights {
    ops::Matrix gate, up, down;
    float clamp = 0.0f;  // <= 0: none
};

// out[t] = down(swiglu(gate v[t], up v[t])) for n rows of v [n][n_embd]; out [n][n_embd].
// Gate and up run in one parallel region, then the SwiGLU rows, then down; each row's result
// is what the row alone gives (ops/matmul.h). Scratch floats come from `scratch` (not reset).
void swiglu_ffn(const SwigluWeights& w, const float* v, int64_t n, float* out, ThreadPool& pool,
                ScratchArena& scratch, FfnBuffers& buf);

}  // namespace ds4::blocks
