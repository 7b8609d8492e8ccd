#include "ops/rope.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace ds4::ops {

Rope::Rope(const RopeParams& p) : dim_(p.rope_dim) {
    if (dim_ <= 0 || dim_ % 2 != 0) fail("rope dimension {} must be positive and even", dim_);
    const int half = dim_ / 2;
    freq_.resize(half);
    // YaRN ramp bounds: C(r) = dim * ln(orig_ctx / (2 pi r)) / (2 ln base).
    const double two_pi = 6.283185307179586;
    auto corr = [&](double r) {
        return dim_ * std::log(p.yarn_orig_ctx / (two_pi * r)) / (2.0 * std::log(double(p.freq_base)));
    };
    const double low = std::max(0.0, std::floor(corr(p.yarn_beta_fast)));
    const double high = std::min(double(dim_ - 1), std::ceil(corr(p.yarn_beta_slow)));
    for (int i = 0; i < half; ++i) {
        const double f = std::pow(double(p.freq_base), -2.0 * i / dim_);
        if (!p.yarn) {
            freq_[i] = float(f);
            continue;
        }
        const double ramp = std::clamp((i - low) / std::max(0.001, high - low), 0.0, 1.0);
        freq_[i] = float(f * ((1.0 - ramp) + ramp / p.yarn_factor));
    }
}

void Rope::apply(float* x, int n_heads, int head_dim, int64_t pos, bool inverse) const {
    rotate(x, n_heads, head_dim, head_dim - dim_, pos, inverse);
}

void Rope::apply_leading(float* x, int n_heads, int head_dim, int64_t pos) const {
    rotate(x, n_heads, head_dim, 0, pos, false);
}

void Rope::rotate(float* x, int n_heads, int head_dim, int start, int64_t pos, bool inverse) const {
    const int half = dim_ / 2;
    for (int i = 0; i < half; ++i) {
        const float phi = float(pos) * freq_[i];  // fp32 angle, as the official reference
        const float c = std::cos(phi), s = inverse ? -std::sin(phi) : std::sin(phi);
        for (int h = 0; h < n_heads; ++h) {
            float* v = x + int64_t(h) * head_dim + start + 2 * i;
            const float a = v[0], b = v[1];
            v[0] = a * c - b * s;
            v[1] = a * s + b * c;
        }
    }
}

}  // namespace ds4::ops
