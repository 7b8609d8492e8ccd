// Indexer scores: the SIMD kernels (AVX2, AVX-512) against the scalar reference and a
// double-precision evaluation of the definition, over head counts that fill whole vectors,
// leave remainders and fall short of one vector, dims with and without vector-length
// multiples, and row ranges cut anywhere (a row's score must not depend on the range).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "ops/indexer.h"
#include "quant/quant.h"

namespace ds4::ops {
namespace {

struct Case {
    int heads, dim;
    int64_t rows;
};

std::vector<double> definition(const std::vector<float>& q, const std::vector<float>& w, int H,
                               int D, const std::vector<float>& keys, int64_t rows) {
    std::vector<double> out(size_t(rows), 0.0);
    for (int64_t r = 0; r < rows; ++r)
        for (int h = 0; h < H; ++h) {
            double dot = 0;
            for (int d = 0; d < D; ++d) dot += double(q[size_t(h * D + d)]) * keys[size_t(r * D + d)];
            out[size_t(r)] += double(w[size_t(h)]) * std::max(0.0, dot);
        }
    return out;
}

const quant::Isa kIsas[] = {quant::Isa::Scalar, quant::Isa::Avx2, quant::Isa::Avx512Vnni};

TEST(IndexerScores, SimdKernelsMatchTheReferenceAndTheDefinition) {
    std::mt19937 rng(11);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const Case cases[] = {{1, 1, 1},   {3, 5, 7},     {8, 16, 9},    {16, 64, 33},  {17, 37, 50},
                          {24, 128, 5}, {64, 128, 300}, {65, 129, 11}, {80, 32, 64}, {7, 200, 1000}};
    for (const Case& c : cases) {
        std::vector<float> q(size_t(c.heads * c.dim)), w(size_t(c.heads)), keys(size_t(c.rows * c.dim));
        for (auto& v : q) v = g(rng);
        for (auto& v : w) v = g(rng);  // signed, as the model's projected weights are
        for (auto& v : keys) v = g(rng);
        const auto exact = definition(q, w, c.heads, c.dim, keys, c.rows);
        double bound = 0;  // the size of the terms: errors are relative to it
        for (int h = 0; h < c.heads; ++h) bound += std::abs(w[size_t(h)]);
        bound *= std::sqrt(double(c.dim)) * 4;
        for (quant::Isa isa : kIsas) {
            if (!quant::isa_supported(isa)) continue;
            std::vector<float> s(size_t(c.rows), NAN);
            indexer_scores(q.data(), w.data(), c.heads, c.dim, keys.data(), 0, c.rows, s.data(), isa);
            double worst = 0;
            for (int64_t r = 0; r < c.rows; ++r) {
                ASSERT_TRUE(std::isfinite(s[size_t(r)]));
                worst = std::max(worst, std::abs(s[size_t(r)] - exact[size_t(r)]));
            }
            EXPECT_LT(worst, 2e-6 * bound) << quant::isa_name(isa) << " heads " << c.heads << " dim "
                                           << c.dim << " rows " << c.rows;
        }
    }
}

// Relu matters: with every dot negative the scores are exactly zero, and a row whose key is
// the query of a single positive-weight head scores that head's weight times |q|^2.
TEST(IndexerScores, NegativeDotsScoreZero) {
    const int H = 20, D = 24;
    std::vector<float> q(size_t(H * D)), w(size_t(H), 1.5f), keys(size_t(3 * D));
    for (int h = 0; h < H; ++h)
        for (int d = 0; d < D; ++d) q[size_t(h * D + d)] = 1.0f + 0.01f * float(h + d);
    for (int d = 0; d < D; ++d) {
        keys[size_t(d)] = -1.0f;                 // row 0: every dot < 0
        keys[size_t(D + d)] = 0.0f;              // row 1: every dot 0
        keys[size_t(2 * D + d)] = d == 0 ? 2.0f : 0.0f;  // row 2: dot_h = 2 q_h[0]
    }
    double want = 0;
    for (int h = 0; h < H; ++h) want += 1.5 * 2.0 * q[size_t(h * D)];
    for (quant::Isa isa : kIsas) {
        if (!quant::isa_supported(isa)) continue;
        std::vector<float> s(3, NAN);
        indexer_scores(q.data(), w.data(), H, D, keys.data(), 0, 3, s.data(), isa);
        EXPECT_EQ(s[0], 0.0f) << quant::isa_name(isa);
        EXPECT_EQ(s[1], 0.0f) << quant::isa_name(isa);
        EXPECT_NEAR(s[2], want, 1e-4 * want) << quant::isa_name(isa);
    }
}

// The model splits rows over threads (decode) and calls once per token over all rows
// (prefill): any cut of the range must give the same bits for each row.
TEST(IndexerScores, ScoresDoNotDependOnTheRowRange) {
    std::mt19937 rng(5);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const int H = 64, D = 128;
    const int64_t rows = 203;
    std::vector<float> q(size_t(H * D)), w(static_cast<size_t>(H)), keys(size_t(rows * D));
    for (auto& v : q) v = g(rng);
    for (auto& v : w) v = g(rng);
    for (auto& v : keys) v = g(rng);
    for (quant::Isa isa : kIsas) {
        if (!quant::isa_supported(isa)) continue;
        std::vector<float> whole(static_cast<size_t>(rows)), pieces(size_t(rows), NAN);
        indexer_scores(q.data(), w.data(), H, D, keys.data(), 0, rows, whole.data(), isa);
        for (int64_t r0 = 0, step = 1; r0 < rows; r0 += step, step = step % 7 + 2)
            indexer_scores(q.data(), w.data(), H, D, keys.data(), r0, std::min(rows, r0 + step),
                           pieces.data(), isa);
        for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(whole[size_t(r)], pieces[size_t(r)]) << quant::isa_name(isa) << " row " << r;
    }
}

}  // namespace
}  // namespace ds4::ops
