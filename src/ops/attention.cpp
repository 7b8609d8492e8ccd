#include "ops/attention.h"

#include "ops/attention_kernels.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace ds4::ops {

void sink_attention_reference(const float* q, int n_head, int head_dim, const float* const* rows,
                              int64_t n_rows, const float* sinks, float scale, float* out) {
    std::vector<float> logit(n_rows);
    for (int h = 0; h < n_head; ++h) {
        const float* qh = q + int64_t(h) * head_dim;
        float mx = sinks[h];
        for (int64_t s = 0; s < n_rows; ++s) {
            float dot = 0.0f;
            for (int d = 0; d < head_dim; ++d) dot += qh[d] * rows[s][d];
            logit[s] = dot * scale;
            mx = std::max(mx, logit[s]);
        }
        float denom = std::exp(sinks[h] - mx);
        float* oh = out + int64_t(h) * head_dim;
        std::fill(oh, oh + head_dim, 0.0f);
        for (int64_t s = 0; s < n_rows; ++s) {
            const float w = std::exp(logit[s] - mx);
            denom += w;
            for (int d = 0; d < head_dim; ++d) oh[d] += w * rows[s][d];
        }
        const float inv = 1.0f / denom;
        for (int d = 0; d < head_dim; ++d) oh[d] *= inv;
    }
}

void sink_attention(const float* q, int n_head, int head_dim, const float* const* rows,
                    int64_t n_rows, const float* sinks, float scale, float* out, quant::Isa isa) {
    if (isa == quant::Isa::Scalar || n_rows == 0) {
        sink_attention_reference(q, n_head, head_dim, rows, n_rows, sinks, scale, out);
        return;
    }
    thread_local std::vector<float> scratch;
    scratch.resize(size_t(n_head) * size_t(n_rows + 1));
    if (isa == quant::Isa::Avx512Vnni)
        avx512::attend_heads(q, n_head, head_dim, rows, n_rows, sinks, scale, out, scratch.data());
    else
        avx2::attend_heads(q, n_head, head_dim, rows, n_rows, sinks, scale, out, scratch.data());
}

}  // namespace ds4::ops
