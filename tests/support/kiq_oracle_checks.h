// Checks shared by the Q2_K, Q4_K and IQ2_XXS oracle tests (the K-quant and IQ weight
// formats, whose dots take Q8_K activations): our dequantization, dot kernels and reference
// quantizer against the oracle's ggml on the same data.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "common/half.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "support/ggml_ref.h"

namespace ds4::kiq_test {

constexpr int64_t kRow = 4096;             // values per row (16 super-blocks)
constexpr int64_t kValues = int64_t(1) << 20;  // per check: 256 rows

inline const oracle::Ggml& ggml() {
    const oracle::Ggml* g = oracle::Ggml::get();
    if (!g) throw std::runtime_error(oracle::Ggml::reason());
    return *g;
}

// n values, row by row cycling through distributions: gaussian, uniform, heavy-tailed
// (student-t with 3 degrees of freedom), gaussian with 1% outliers x30, and rows with scaled
// columns; about one block in 16 is all zeros and one in 16 has one zero sub-block of 32.
inline std::vector<float> make_values(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> gauss(0.f, 1.f);
    std::uniform_real_distribution<float> uni(-1.f, 1.f);
    std::student_t_distribution<float> heavy(3.f);
    std::uniform_real_distribution<float> u01(0.f, 1.f);
    std::vector<float> colscale(kRow);
    for (auto& c : colscale) c = std::exp(gauss(rng));
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t r = 0; r < n / kRow; ++r) {
        const int kind = int(r % 5);
        const float amp = std::exp(2.f * gauss(rng)) * 0.02f;  // rows of varied magnitude
        for (int64_t c = 0; c < kRow; ++c) {
            float v;
            switch (kind) {
                case 0: v = gauss(rng); break;
                case 1: v = uni(rng); break;
                case 2: v = heavy(rng); break;
                case 3: v = gauss(rng) * (u01(rng) < 0.01f ? 30.f : 1.f); break;
                default: v = gauss(rng) * colscale[size_t(c)]; break;
            }
            x[size_t(r * kRow + c)] = amp * v;
        }
    }
    for (int64_t b = 0; b < n / 256; ++b) {
        const float u = u01(rng);
        if (u < 1.f / 16) std::fill_n(x.begin() + b * 256, 256, 0.f);
        else if (u < 2.f / 16) std::fill_n(x.begin() + b * 256 + 32 * int(rng() % 8), 32, 0.f);
    }
    return x;
}

// An importance per column (x^2-like: squared gaussians, plus a floor), as an imatrix.
inline std::vector<float> make_importance(uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> gauss(0.f, 1.f);
    std::vector<float> w(kRow);
    for (auto& v : w) {
        const float z = gauss(rng);
        v = z * z + 1e-3f;
    }
    return w;
}

// Random bytes for nblocks blocks of t, with every f16 field at f16_offsets made finite.
inline std::vector<uint8_t> random_blocks(TensorType t, int64_t nblocks,
                                          std::initializer_list<int> f16_offsets, uint32_t seed) {
    const size_t bsize = row_bytes(t, 256);
    std::mt19937 rng(seed);
    std::vector<uint8_t> out(size_t(nblocks) * bsize);
    for (auto& b : out) b = uint8_t(rng());
    for (int64_t i = 0; i < nblocks; ++i)
        for (int off : f16_offsets) {
            uint8_t* p = out.data() + size_t(i) * bsize + size_t(off);
            if ((p[1] & 0x7c) == 0x7c) p[1] &= uint8_t(~0x40);  // exponent 31 -> 15
        }
    return out;
}

// Our dequantization equals ggml's to_float bit for bit on the given blocks.
inline void expect_dequant_identical(TensorType t, const std::vector<uint8_t>& blocks) {
    const int64_t n = int64_t(blocks.size() / row_bytes(t, 256)) * 256;
    std::vector<float> ours(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
    quant::dequantize_row(t, blocks.data(), ours.data(), n);
    ggml().to_float(t, blocks.data(), ref.data(), n);
    int64_t mismatches = 0, first = -1;
    for (int64_t i = 0; i < n; ++i)
        if (std::memcmp(&ours[size_t(i)], &ref[size_t(i)], 4) != 0) {
            if (first < 0) first = i;
            ++mismatches;
        }
    EXPECT_EQ(mismatches, 0) << tensor_type_name(t) << ": first at value " << first << ": ours "
                             << (first >= 0 ? ours[size_t(first)] : 0) << " ggml "
                             << (first >= 0 ? ref[size_t(first)] : 0);
}

// Dots of every row of `weights` (rows of kRow values) with Q8_K activations from ggml's
// from_float: ours on every supported ISA against ggml's vec_dot. Returns the largest
// |ours - ggml| / sum_i |w_i a_i| seen.
inline double max_dot_error(TensorType t, const std::vector<uint8_t>& weights, uint32_t seed) {
    const size_t wrow = row_bytes(t, kRow), arow = row_bytes(TensorType::Q8_K, kRow);
    const int64_t rows = int64_t(weights.size() / wrow);
    std::mt19937 rng(seed);
    std::normal_distribution<float> gauss(0.f, 1.f);
    std::vector<float> x(kRow), wf(kRow);
    std::vector<uint8_t> act(arow);
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : x) v = gauss(rng) * (r % 3 == 0 ? 100.f : 1.f);
        ggml().from_float(TensorType::Q8_K, x.data(), act.data(), kRow);
        const uint8_t* w = weights.data() + size_t(r) * wrow;
        const float ref = ggml().vec_dot(t, kRow, w, act.data());
        // |w_i a_i| from the dequantized weights and the activation codes d * q
        quant::dequantize_row(t, w, wf.data(), kRow);
        const auto* ab = reinterpret_cast<const quant::BlockQ8_K*>(act.data());
        double mag = 0;
        for (int64_t i = 0; i < kRow; ++i)
            mag += std::fabs(double(wf[size_t(i)]) * ab[i / 256].d * ab[i / 256].qs[i % 256]);
        for (int isa = 0; isa < quant::kIsaCount; ++isa) {
            if (!quant::isa_supported(quant::Isa(isa))) continue;
            const float ours = quant::format_ops(t)->dot[isa](kRow, w, act.data());
            const double err = mag > 0 ? std::fabs(double(ours) - ref) / mag
                                       : std::fabs(double(ours) - ref);
            worst = std::max(worst, err);
            EXPECT_TRUE(std::isfinite(ours)) << quant::isa_name(quant::Isa(isa)) << " row " << r;
        }
    }
    return worst;
}

constexpr int kKinds = 5;  // distributions of make_values, by row % kKinds
inline const char* kind_name(int k) {
    static const char* names[kKinds] = {"gaussian", "uniform", "student-t3", "outliers",
                                        "col-scaled"};
    return k < kKinds ? names[k] : "all";
}

// Weighted RMSE, sqrt(sum imp_c (y_i - x_i)^2 / sum imp_c) with c the column of value i, per
// distribution kind ([0, kKinds)) and over all values ([kKinds]).
inline std::vector<double> weighted_rmse(const std::vector<float>& x, const std::vector<float>& y,
                                         const float* imp) {
    std::vector<double> num(kKinds + 1), den(kKinds + 1);
    for (size_t i = 0; i < x.size(); ++i) {
        const int kind = int((i / kRow) % kKinds);
        const double w = imp ? imp[i % kRow] : 1.0;
        const double e = double(y[i]) - x[i];
        for (int k : {kind, kKinds}) {
            num[size_t(k)] += w * e * e;
            den[size_t(k)] += w;
        }
    }
    std::vector<double> r(kKinds + 1);
    for (size_t k = 0; k < r.size(); ++k) r[k] = std::sqrt(num[k] / den[k]);
    return r;
}

struct RmsePair {
    std::vector<double> ours, ggml;  // per kind, then over all
};

// Quantizes x (rows of kRow) with our reference quantizer and with ggml_quantize_chunk using
// the same importance (nullptr = none), checks our blocks are valid (finite, non-negative f16
// scales at f16_offsets; finite dequantization) and returns both weighted RMSEs.
inline RmsePair compare_quantizers(TensorType t, const std::vector<float>& x,
                                   const float* imatrix, std::initializer_list<int> f16_offsets) {
    const int64_t rows = int64_t(x.size()) / kRow;
    const size_t wrow = row_bytes(t, kRow), bsize = row_bytes(t, 256);
    std::vector<uint8_t> ours(size_t(rows) * wrow), ref(ours.size());
    std::vector<float> imp_full;
    if (imatrix) {
        imp_full.resize(x.size());
        for (size_t i = 0; i < x.size(); ++i) imp_full[i] = imatrix[i % kRow];
    }
    for (int64_t r = 0; r < rows; ++r)
        quant::quantize_row(t, x.data() + r * kRow, ours.data() + size_t(r) * wrow, kRow,
                            imatrix ? imp_full.data() + r * kRow : nullptr);
    ggml().quantize_chunk(t, x.data(), ref.data(), rows, kRow, imatrix);
    int64_t bad = 0;
    for (size_t b = 0; b < ours.size() / bsize; ++b)
        for (int off : f16_offsets) {
            uint16_t h;
            std::memcpy(&h, ours.data() + b * bsize + size_t(off), 2);
            const float v = f16_to_f32(h);
            bad += !(std::isfinite(v) && v >= 0);
        }
    EXPECT_EQ(bad, 0) << "blocks with a negative or non-finite f16 scale";
    std::vector<float> y_ours(x.size()), y_ref(x.size());
    quant::dequantize_row(t, ours.data(), y_ours.data(), int64_t(x.size()));
    ggml().to_float(t, ref.data(), y_ref.data(), int64_t(x.size()));
    EXPECT_TRUE(
        std::all_of(y_ours.begin(), y_ours.end(), [](float v) { return std::isfinite(v); }));
    return {weighted_rmse(x, y_ours, imatrix), weighted_rmse(x, y_ref, imatrix)};
}

// Runs compare_quantizers for each importance setting and holds our RMSE to at most
// 1.02 x ggml's, overall and for every distribution; prints the measured ratios.
struct ImportanceCase {
    const char* name;
    const float* imatrix;
};
inline void expect_quantizer_no_worse(TensorType t, const std::vector<float>& x,
                                      std::initializer_list<ImportanceCase> cases,
                                      std::initializer_list<int> f16_offsets) {
    for (const ImportanceCase& c : cases) {
        const RmsePair r = compare_quantizers(t, x, c.imatrix, f16_offsets);
        for (int k = kKinds; k >= 0; --k) {
            const double ratio = r.ours[size_t(k)] / r.ggml[size_t(k)];
            std::printf("%s importance %-8s %-10s RMSE ours %.5g ggml %.5g ratio %.4f\n",
                        tensor_type_name(t).c_str(), c.name, kind_name(k), r.ours[size_t(k)],
                        r.ggml[size_t(k)], ratio);
            EXPECT_LE(ratio, 1.02) << c.name << " " << kind_name(k);
        }
    }
}

}  // namespace ds4::kiq_test
