// RMS normalisation: y = w * x / sqrt(mean(x^2) + eps); w == nullptr means no weight.
// The sum of squares is accumulated in double (as ggml does), so long rows stay exact.
#pragma once

#include <cmath>
#include <cstdint>

namespace ds4::ops {

inline void rms_norm(const float* x, int64_t n, const float* w, float eps, float* y) {
    double ss = 0.0;
    for (int64_t i = 0; i < n; ++i) ss += double(x[i]) * x[i];
    const float scale = 1.0f / std::sqrt(float(ss / double(n)) + eps);
    if (w)
        for (int64_t i = 0; i < n; ++i) y[i] = w[i] * (x[i] * scale);
    else
        for (int64_t i = 0; i < n; ++i) y[i] = x[i] * scale;
}

}  // namespace ds4::ops
