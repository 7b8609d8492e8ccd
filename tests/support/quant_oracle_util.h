// Shared checks of our quant formats against the oracle's ggml (quant_*_oracle_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "quant/quant.h"
#include "support/ggml_ref.h"
#include "support/quant_test_data.h"

namespace ds4::quant::testing {

// Values per distribution: 6 distributions x 2^18 = 1.5M values per format.
inline constexpr int64_t kOracleValues = int64_t(1) << 18;
inline constexpr int64_t kOracleRow = 4096;  // row length of the dot comparisons

inline const oracle::Ggml& ggml() {
    const oracle::Ggml* g = oracle::Ggml::get();
    if (!g) throw std::runtime_error(oracle::Ggml::reason());
    return *g;
}

// Index of the first float whose bits differ, or -1.
inline int64_t first_bit_difference(const std::vector<float>& a, const std::vector<float>& b) {
    for (size_t i = 0; i < a.size(); ++i)
        if (std::bit_cast<uint32_t>(a[i]) != std::bit_cast<uint32_t>(b[i])) return int64_t(i);
    return a.size() == b.size() ? -1 : int64_t(a.size());
}
inline int64_t first_byte_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i)
        if (a[i] != b[i]) return int64_t(i);
    return a.size() == b.size() ? -1 : int64_t(std::min(a.size(), b.size()));
}

inline std::vector<uint8_t> ggml_quantize(TensorType t, const std::vector<float>& x, int64_t row) {
    std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())));
    const int64_t rows = int64_t(x.size()) / row;
    EXPECT_EQ(ggml().quantize_chunk(t, x.data(), q.data(), rows, row, nullptr), q.size());
    return q;
}
inline std::vector<uint8_t> our_quantize(TensorType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())));
    quantize_row(t, x.data(), q.data(), int64_t(x.size()));
    return q;
}
inline std::vector<float> ggml_dequantize(TensorType t, const std::vector<uint8_t>& q, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    if (t == TensorType::F32)  // ggml has no to_float for F32: its rows are used as they are
        std::memcpy(y.data(), q.data(), std::min(q.size(), y.size() * sizeof(float)));
    else
        ggml().to_float(t, q.data(), y.data(), n);
    return y;
}
inline std::vector<float> our_dequantize(TensorType t, const std::vector<uint8_t>& q, int64_t n) {
    std::vector<float> y(static_cast<size_t>(n));
    dequantize_row(t, q.data(), y.data(), n);
    return y;
}
// Activation conversions; ggml's buffer starts zeroed (its Q8_K leaves the bsums of an
// all-zero block unwritten, ours zeroes them).
inline std::vector<uint8_t> ggml_activation(TensorType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())), 0);
    ggml().from_float(t, x.data(), q.data(), int64_t(x.size()));
    return q;
}
inline std::vector<uint8_t> our_activation(TensorType t, const std::vector<float>& x) {
    std::vector<uint8_t> q(row_bytes(t, int64_t(x.size())), 0xa5);
    quantize_activation(t, x.data(), q.data(), int64_t(x.size()));
    return q;
}

// The weight-quantizer acceptance for format t on values x (rows of kOracleRow): ours
// produces valid blocks whose RMSE is at most 1.02 x ggml's; returns whether the blocks are
// also byte-identical.
inline bool check_weight_quantizer(TensorType t, const std::vector<float>& x, const char* what) {
    const int64_t n = int64_t(x.size());
    const std::vector<uint8_t> theirs = ggml_quantize(t, x, kOracleRow);
    const std::vector<uint8_t> ours = our_quantize(t, x);
    const double rmse_theirs = rmse(x, ggml_dequantize(t, theirs, n));
    const double rmse_ours = rmse(x, ggml_dequantize(t, ours, n));  // decoded by ggml: valid
    EXPECT_LE(rmse_ours, 1.02 * rmse_theirs) << what;
    return first_byte_difference(ours, theirs) < 0;
}

// Our quantizer row by row against ggml_quantize_chunk on the same rows of `row` values, both
// with the same importance per column (imatrix: `row` weights, or nullptr for none): the
// index of the first byte that differs, or -1.
inline int64_t quantizer_byte_difference(TensorType t, const std::vector<float>& x, int64_t row,
                                         const float* imatrix) {
    const int64_t rows = int64_t(x.size()) / row;
    const size_t rb = row_bytes(t, row);
    std::vector<uint8_t> theirs(rb * size_t(rows)), ours(theirs.size());
    EXPECT_EQ(ggml().quantize_chunk(t, x.data(), theirs.data(), rows, row, imatrix), theirs.size());
    for (int64_t r = 0; r < rows; ++r)
        quantize_row(t, x.data() + r * row, ours.data() + size_t(r) * rb, row, imatrix);
    return first_byte_difference(ours, theirs);
}

// Largest dot_rel_err of our kernel on `isa` against ggml's vec_dot, over the rows of w
// (kOracleRow values each) with activation row a.
inline double max_dot_err_vs_ggml(TensorType t, Isa isa, const std::vector<uint8_t>& w,
                                  const std::vector<uint8_t>& a) {
    const TensorType at = dot_type(t);
    const size_t wrow = row_bytes(t, kOracleRow);
    const int64_t rows = int64_t(w.size() / wrow);
    std::vector<float> af(static_cast<size_t>(kOracleRow)), wf(af.size());
    dequantize_row(at, a.data(), af.data(), kOracleRow);
    const DotFn dot = format_ops(t)->dot[int(isa)];
    double worst = 0;
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* wr = w.data() + size_t(r) * wrow;
        dequantize_row(t, wr, wf.data(), kOracleRow);
        double abs_sum = 0;
        for (size_t i = 0; i < wf.size(); ++i) abs_sum += std::fabs(double(wf[i]) * af[i]);
        const float theirs = ggml().vec_dot(t, kOracleRow, wr, a.data());
        const float ours = dot(kOracleRow, wr, a.data());
        worst = std::max(worst, dot_rel_err(ours, theirs, abs_sum));
    }
    return worst;
}

}  // namespace ds4::quant::testing
