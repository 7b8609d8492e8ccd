#include "ops/hc.h"

#include <algorithm>
#include <cmath>

namespace ds4::ops {
namespace {
float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
}  // namespace

HcMix hc_split(const float* m, const float* scale, const float* base, int n, int iterations,
               float eps) {
    HcMix mix;
    mix.n_hc = n;
    mix.pre.resize(n);
    mix.post.resize(n);
    mix.comb.resize(size_t(n) * n);
    for (int k = 0; k < n; ++k) {
        mix.pre[k] = sigmoid(scale[0] * m[k] + base[k]) + eps;
        mix.post[k] = 2.0f * sigmoid(scale[1] * m[n + k] + base[n + k]);
    }
    float* C = mix.comb.data();
    // Row softmax (over destinations j for each source i), plus eps.
    for (int i = 0; i < n; ++i) {
        float zmax = -INFINITY;
        for (int j = 0; j < n; ++j) {
            C[i * n + j] = scale[2] * m[2 * n + i * n + j] + base[2 * n + i * n + j];
            zmax = std::max(zmax, C[i * n + j]);
        }
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) sum += (C[i * n + j] = std::exp(C[i * n + j] - zmax));
        for (int j = 0; j < n; ++j) C[i * n + j] = C[i * n + j] / sum + eps;
    }
    auto normalize_columns = [&] {
        for (int j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (int i = 0; i < n; ++i) sum += C[i * n + j];
            for (int i = 0; i < n; ++i) C[i * n + j] /= sum + eps;
        }
    };
    normalize_columns();
    for (int it = 1; it < iterations; ++it) {
        for (int i = 0; i < n; ++i) {
            float sum = 0.0f;
            for (int j = 0; j < n; ++j) sum += C[i * n + j];
            for (int j = 0; j < n; ++j) C[i * n + j] /= sum + eps;
        }
        normalize_columns();
    }
    return mix;
}

void hc_weighted_sum(const float* X, const float* pre, int n_hc, int64_t n_embd, float* y) {
    for (int64_t c = 0; c < n_embd; ++c) {
        float acc = 0.0f;
        for (int k = 0; k < n_hc; ++k) acc += pre[k] * X[k * n_embd + c];
        y[c] = acc;
    }
}

void hc_post(const HcMix& mix, const float* F, float* X, int64_t n_embd) {
    // Columns in blocks: the sources are copied out first (X is overwritten in place), then
    // each destination is a loop over the block's columns that the compiler vectorizes (one
    // column at a time, with the streams strided, it took ~3% of a prefill). Per value the
    // operations and their order are those of the definition.
    constexpr int64_t kBlock = 64;
    const int n = mix.n_hc;
    std::vector<float> src(size_t(n) * kBlock);
    for (int64_t c0 = 0; c0 < n_embd; c0 += kBlock) {
        const int64_t len = std::min(kBlock, n_embd - c0);
        for (int i = 0; i < n; ++i) std::copy_n(X + i * n_embd + c0, len, &src[size_t(i) * kBlock]);
        for (int j = 0; j < n; ++j) {
            float* out = X + j * n_embd + c0;
            const float post = mix.post[j];
            for (int64_t c = 0; c < len; ++c) out[c] = post * F[c0 + c];
            for (int i = 0; i < n; ++i) {
                const float w = mix.comb[size_t(i) * n + j];
                const float* s = &src[size_t(i) * kBlock];
                for (int64_t c = 0; c < len; ++c) out[c] += w * s[c];
            }
        }
    }
}

std::vector<float> hc_head_weights(const float* m, float scale, const float* base, int n_hc,
                                   float eps) {
    std::vector<float> a(n_hc);
    for (int k = 0; k < n_hc; ++k) a[k] = sigmoid(scale * m[k] + base[k]) + eps;
    return a;
}

}  // namespace ds4::ops
