#include "model/blocks/swiglu_ffn.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/error.h"

namespace ds4::blocks {

void swiglu(float* g, const float* u, int64_t n, float clamp) {
    for (int64_t i = 0; i < n; ++i) {
        float gi = g[i], ui = u[i];
        if (clamp > 0.0f) {
            gi = std::min(gi, clamp);  // gate: upper bound only
            ui = std::clamp(ui, -clamp, clamp);
        }
        g[i] = gi / (1.0f + std::exp(-gi)) * ui;
    }
}

void swiglu_ffn(const SwigluWeights& w, const float* v, int64_t n, float* out, ThreadPool& pool,
                ScratchArena& scratch, FfnBuffers& buf) {
    const int64_t D = w.gate.cols, F = w.gate.rows;
    const TensorType t_in = quant::dot_type(w.gate.type), t_down = quant::dot_type(w.down.type);
    if (quant::dot_type(w.up.type) != t_in) fail("swiglu: gate and up projections take different activation types");
    buf.v_sh.set(v, n, D, t_in, &pool);
    float* g = scratch.take(n * F);
    float* u = scratch.take(n * F);
    std::vector<const void*> act(static_cast<size_t>(n));
    std::vector<float*> yg(static_cast<size_t>(n)), yu(static_cast<size_t>(n)), yd(static_cast<size_t>(n));
    for (int64_t t = 0; t < n; ++t) {
        act[size_t(t)] = buf.v_sh.row(t);
        yg[size_t(t)] = g + t * F;
        yu[size_t(t)] = u + t * F;
        yd[size_t(t)] = out + t * D;
    }
    const ops::MatmulJob gate_up[2] = {{w.gate, act.data(), yg.data(), n}, {w.up, act.data(), yu.data(), n}};
    ops::matmul_jobs(gate_up, 2, pool);
    buf.m_sh.resize(n, F, t_down);
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) {
            swiglu(g + t * F, u + t * F, F, w.clamp);
            quant::quantize_activation(t_down, g + t * F, buf.m_sh.row(t), F);
        }
    });
    for (int64_t t = 0; t < n; ++t) act[size_t(t)] = buf.m_sh.row(t);
    const ops::MatmulJob down{w.down, act.data(), yd.data(), n};
    ops::matmul_jobs(&down, 1, pool);
}

}  // namespace ds4::blocks
