// Test data for the quant format tests (unit and oracle): seeded random rows in several
// distributions, and the error measures the acceptance criteria are stated in.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/quant.h"

namespace ds4::quant::testing {

enum class Dist { Gaussian, Uniform, Outliers, ZeroBlocks, Tiny, Huge };
inline const char* dist_name(Dist d) {
    switch (d) {
        case Dist::Gaussian: return "gaussian";
        case Dist::Uniform: return "uniform";
        case Dist::Outliers: return "outliers";
        case Dist::ZeroBlocks: return "zero_blocks";
        case Dist::Tiny: return "tiny";
        case Dist::Huge: return "huge";
    }
    return "?";
}
inline constexpr Dist kAllDists[] = {Dist::Gaussian, Dist::Uniform,  Dist::Outliers,
                                     Dist::ZeroBlocks, Dist::Tiny, Dist::Huge};

// n values; ZeroBlocks zeroes every third run of `block` values (and leaves others gaussian);
// Outliers puts a value 50-200x the typical size at about 1% of positions; Tiny and Huge are
// gaussian scaled by 1e-6 and 1e4 (still finite in every format's dot).
inline std::vector<float> random_values(Dist dist, int64_t n, uint32_t seed, int block = 256) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
    std::uniform_real_distribution<float> u01(0.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) {
        float x = gauss(rng);
        switch (dist) {
            case Dist::Gaussian: break;
            case Dist::Uniform: x = uni(rng); break;
            case Dist::Outliers:
                if (u01(rng) < 0.01f) x *= 50.0f + 150.0f * u01(rng);
                break;
            case Dist::ZeroBlocks:
                if ((i / block) % 3 == 1) x = 0.0f;
                break;
            case Dist::Tiny: x *= 1e-6f; break;
            case Dist::Huge: x *= 1e4f; break;
        }
        v[size_t(i)] = x;
    }
    return v;
}

inline double rmse(const std::vector<float>& a, const std::vector<float>& b) {
    double s = 0;
    for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
    return std::sqrt(s / double(a.size()));
}

// |x - y| relative to the scale of the sum, sum |w_i * a_i| (the dot's condition: float
// summation errors are proportional to it, not to the result, which may cancel to ~0).
inline double dot_rel_err(double x, double y, double abs_sum) {
    if (abs_sum == 0) return x == y ? 0.0 : INFINITY;
    return std::fabs(x - y) / abs_sum;
}

// One weight row of format w and its activation row in dot_type(w), built with our own
// quantizers from random values, plus the dequantized values of both.
struct DotCase {
    TensorType w_type, a_type;
    int64_t n;
    std::vector<uint8_t> w, a;
    std::vector<float> wf, af;  // dequantized
    double abs_sum() const {     // sum |w_i * a_i|
        double s = 0;
        for (size_t i = 0; i < wf.size(); ++i) s += std::fabs(double(wf[i]) * af[i]);
        return s;
    }
};

inline DotCase make_dot_case(TensorType w_type, int64_t n, Dist dist, uint32_t seed) {
    DotCase c{w_type, dot_type(w_type), n, {}, {}, {}, {}};
    const std::vector<float> wv = random_values(dist, n, seed);
    const std::vector<float> av = random_values(Dist::Gaussian, n, seed + 1);
    c.w.resize(row_bytes(w_type, n));
    c.a.resize(row_bytes(c.a_type, n));
    quantize_row(w_type, wv.data(), c.w.data(), n);
    quantize_activation(c.a_type, av.data(), c.a.data(), n);
    c.wf.resize(size_t(n));
    c.af.resize(size_t(n));
    dequantize_row(w_type, c.w.data(), c.wf.data(), n);
    dequantize_row(c.a_type, c.a.data(), c.af.data(), n);
    return c;
}

// The ISAs this CPU can run, scalar first.
inline std::vector<Isa> supported_isas() {
    std::vector<Isa> v;
    for (int i = 0; i < kIsaCount; ++i)
        if (isa_supported(Isa(i))) v.push_back(Isa(i));
    return v;
}

// The largest dot_rel_err of `isa`'s own kernel for t against the scalar kernel, over the
// given row lengths and every distribution.
inline double max_err_vs_scalar(TensorType t, Isa isa, const std::vector<int64_t>& sizes,
                                uint32_t seed = 1) {
    const FormatOps* ops = format_ops(t);
    double worst = 0;
    for (int64_t n : sizes) {
        for (Dist dist : kAllDists) {
            const DotCase c = make_dot_case(t, n, dist, seed++);
            const double ref = ops->dot[int(Isa::Scalar)](n, c.w.data(), c.a.data());
            const double got = ops->dot[int(isa)](n, c.w.data(), c.a.data());
            const double err = dot_rel_err(got, ref, c.abs_sum());
            if (err > worst) worst = err;
        }
    }
    return worst;
}

}  // namespace ds4::quant::testing
