#include "ops/attention.h"

#include "ops/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ds4::ops {

void attention_reference(const float* q, int n_head, const AttentionRows& r, const float* sinks, float scale,
                         float* out) {
    const int kd = r.key_dim, vd = r.value_dim;
    std::vector<float> logit(size_t(r.n_rows));
    for (int h = 0; h < n_head; ++h) {
        const float* qh = q + int64_t(h) * kd;
        float mx = sinks ? sinks[h] : -INFINITY;
        for (int64_t s = 0; s < r.n_rows; ++s) {
            float dot = 0.0f;
            for (int d = 0; d < kd; ++d) dot += qh[d] * r.keys[s][d];
            logit[size_t(s)] = dot * scale;
            mx = std::max(mx, logit[size_t(s)]);
        }
        float denom = sinks ? std::exp(sinks[h] - mx) : 0.0f;
        float* oh = out + int64_t(h) * vd;
        std::fill(oh, oh + vd, 0.0f);
        for (int64_t s = 0; s < r.n_rows; ++s) {
            const float w = std::exp(logit[size_t(s)] - mx);
            denom += w;
            for (int d = 0; d < vd; ++d) oh[d] += w * r.values[s][d];
        }
        const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;  // 0: no sink and no rows
        for (int d = 0; d < vd; ++d) oh[d] *= inv;
    }
}

void attention(const float* q, int n_head, const AttentionRows& rows, const float* sinks, float scale, float* out,
               quant::Isa isa) {
    if (isa == quant::Isa::Scalar || rows.n_rows == 0) {
        attention_reference(q, n_head, rows, sinks, scale, out);
        return;
    }
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(n_head) * size_t(rows.n_rows + 1));
    if (isa == quant::Isa::Avx512Vnni)
        avx512::attend_heads(q, n_head, rows, sinks, scale, out, scratch.data());
    else
        avx2::attend_heads(q, n_head, rows, sinks, scale, out, scratch.data());
}

void sink_attention_reference(const float* q, int n_head, int head_dim, const float* const* rows,
                              int64_t n_rows, const float* sinks, float scale, float* out) {
    attention_reference(q, n_head, AttentionRows{rows, rows, n_rows, head_dim, head_dim}, sinks, scale, out);
}

void sink_attention(const float* q, int n_head, int head_dim, const float* const* rows,
                    int64_t n_rows, const float* sinks, float scale, float* out, quant::Isa isa) {
    attention(q, n_head, AttentionRows{rows, rows, n_rows, head_dim, head_dim}, sinks, scale, out, isa);
}

}  // namespace ds4::ops
