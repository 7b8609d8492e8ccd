// RMS normalisation: y = w * x / sqrt(mean(x^2) + eps); w == nullptr means no weight.
// LayerNorm: y = w * (x - mean) / sqrt(var + eps) + b (GLM's indexer keys).
// Sums are accumulated in double (as ggml does), so long rows stay exact.
#pragma once

#include <cmath>
#include <cstdint>

namespace ds4::ops {

inline void rms_norm(const float* x, int64_t n, const float* w, float eps, float* y) {
    // Eight independent double sums (the compiler keeps them in vector lanes): one serial
    // chain of adds cost ~1.4 ns per value, 22 us for a 16384-value HC state. The order
    // changes the double sum only in its last bits, far below float precision.
    double part[8] = {};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int l = 0; l < 8; ++l) part[l] += double(x[i + l]) * x[i + l];
    double ss = ((part[0] + part[4]) + (part[2] + part[6])) + ((part[1] + part[5]) + (part[3] + part[7]));
    for (; i < n; ++i) ss += double(x[i]) * x[i];
    const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
    if (w)
        for (int64_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * scale);
    else
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

// w and b may be null (no weight, no bias); y may be x.
inline void layer_norm(const float* x, int64_t n, const float* w, const float* b, float eps, float* y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) sum += x[i];
    const float mean = float(sum / double(n));
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const float d = x[i] - mean;
        ss += double(d) * d;
    }
    const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
    for (int64_t i = 0; i < n; ++i) {
        float v = (x[i] - mean) * scale;
        if (w) v *= w[i];
        if (b) v += b[i];
        y[i] = v;
    }
}

}  // namespace ds4::ops
