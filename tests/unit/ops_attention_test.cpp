// Sink attention: the SIMD kernels (AVX2, AVX-512) against the scalar reference and against a
// double-precision evaluation of the definition, over head counts that exercise the 4-head
// blocks and their remainders, head dims with vector tails, and row counts from 1 to 1400
// (past 512 KB of rows the kernels change their loop order).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "quant/quant.h"

namespace ds4::ops {
namespace {

struct Case {
    int heads, dim;
    int64_t rows;
};

// out[h] = sum_s softmax(q_h.row_s*scale | sink_h) row_s, in double.
std::vector<double> definition(const std::vector<float>& q, int H, int D,
                               const std::vector<std::vector<float>>& rows,
                               const std::vector<float>& sinks, float scale) {
    std::vector<double> out(size_t(H * D), 0.0);
    for (int h = 0; h < H; ++h) {
        std::vector<double> l(rows.size());
        double mx = sinks[h];
        for (size_t s = 0; s < rows.size(); ++s) {
            double d = 0;
            for (int k = 0; k < D; ++k) d += double(q[h * D + k]) * rows[s][k];
            l[s] = d * scale;
            mx = std::max(mx, l[s]);
        }
        double den = std::exp(sinks[h] - mx);
        for (auto& v : l) den += (v = std::exp(v - mx));
        for (size_t s = 0; s < rows.size(); ++s)
            for (int k = 0; k < D; ++k) out[h * D + k] += l[s] / den * rows[s][k];
    }
    return out;
}

TEST(SinkAttention, SimdKernelsMatchTheReferenceAndTheDefinition) {
    std::mt19937 rng(3);
    std::normal_distribution<float> g(0.0f, 1.0f);
    const Case cases[] = {{1, 16, 1},   {3, 37, 5},    {4, 64, 17},  {5, 96, 130},
                          {8, 80, 64},  {9, 512, 33},  {64, 512, 3}, {2, 8, 700},
                          {6, 100, 257}, {16, 128, 640},
                          // beyond 512 KB of rows: the row-span order (attention_simd.h)
                          {5, 520, 600}, {6, 100, 1400}};
    for (const Case& c : cases) {
        std::vector<float> q(size_t(c.heads * c.dim)), sinks(size_t(c.heads));
        for (auto& v : q) v = g(rng);
        for (auto& v : sinks) v = g(rng) * 2.0f;
        std::vector<std::vector<float>> rows(size_t(c.rows), std::vector<float>(size_t(c.dim)));
        std::vector<const float*> ptr;
        for (auto& r : rows) {
            for (auto& v : r) v = g(rng);
            ptr.push_back(r.data());
        }
        const float scale = 1.0f / std::sqrt(float(c.dim));
        const auto exact = definition(q, c.heads, c.dim, rows, sinks, scale);
        std::vector<float> ref(q.size());
        sink_attention_reference(q.data(), c.heads, c.dim, ptr.data(), c.rows, sinks.data(), scale,
                                 ref.data());
        for (quant::Isa isa : {quant::Isa::Scalar, quant::Isa::Avx2, quant::Isa::Avx512Vnni}) {
            if (!quant::isa_supported(isa)) continue;
            std::vector<float> out(q.size(), NAN);
            sink_attention(q.data(), c.heads, c.dim, ptr.data(), c.rows, sinks.data(), scale,
                           out.data(), isa);
            double worst = 0, worst_ref = 0;
            for (size_t i = 0; i < out.size(); ++i) {
                ASSERT_TRUE(std::isfinite(out[i]));
                worst = std::max(worst, std::abs(out[i] - exact[i]));
                worst_ref = std::max(worst_ref, std::abs(double(out[i]) - ref[i]));
            }
            // Outputs are convex combinations of N(0,1) values: absolute errors are meaningful.
            EXPECT_LT(worst, 2e-5) << quant::isa_name(isa) << " heads " << c.heads << " dim "
                                   << c.dim << " rows " << c.rows;
            EXPECT_LT(worst_ref, 2e-5) << quant::isa_name(isa) << " vs reference, heads " << c.heads;
        }
    }
}

// A head's result does not depend on which other heads are computed with it (the server and
// the threaded prefill split heads and positions freely).
class HeadBlocks : public ::testing::TestWithParam<int64_t> {};

// Random queries, sinks and S rows for H heads of dimension D.
struct Problem {
    std::vector<float> q, sinks;
    std::vector<std::vector<float>> rows;
    std::vector<const float*> ptr;
    Problem(int H, int D, int64_t S, unsigned seed) : q(size_t(H * D)), sinks(size_t(H)) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> g;
        for (auto& v : q) v = g(rng);
        for (auto& v : sinks) v = g(rng);
        rows.assign(size_t(S), std::vector<float>(size_t(D)));
        for (auto& r : rows) {
            for (auto& v : r) v = g(rng);
            ptr.push_back(r.data());
        }
    }
};


TEST_P(HeadBlocks, HeadsAreIndependentOfTheirBlock) {
    const int H = 7, D = 96;
    const int64_t S = GetParam();
    Problem p(H, D, S, 4);
    const auto& q = p.q;
    const auto& sinks = p.sinks;
    const auto& ptr = p.ptr;
    std::vector<float> all(H * D), one(D);
    sink_attention(q.data(), H, D, ptr.data(), S, sinks.data(), 0.1f, all.data());
    for (int h = 0; h < H; ++h) {
        sink_attention(q.data() + h * D, 1, D, ptr.data(), S, sinks.data() + h, 0.1f, one.data());
        for (int d = 0; d < D; ++d) ASSERT_EQ(one[d], all[h * D + d]) << "head " << h;
    }
}

// The forward pass writes each token's attention output over its queries (out == q): every
// ISA must give the bits it gives with a separate output (a kernel that wrote a head's output
// before it had read all the queries it needs would not).
TEST_P(HeadBlocks, OutputMayOverwriteTheQueries) {
    const int H = 9, D = 80;
    const int64_t S = GetParam();
    Problem p(H, D, S, 5);
    const auto& q = p.q;
    const auto& sinks = p.sinks;
    const auto& ptr = p.ptr;
    for (int i = 0; i < quant::kIsaCount; ++i) {
        const quant::Isa isa = quant::Isa(i);
        if (!quant::isa_supported(isa)) continue;
        std::vector<float> want(H * D), inplace = q;
        sink_attention(q.data(), H, D, ptr.data(), S, sinks.data(), 0.1f, want.data(), isa);
        sink_attention(inplace.data(), H, D, ptr.data(), S, sinks.data(), 0.1f, inplace.data(), isa);
        for (int k = 0; k < H * D; ++k)
            ASSERT_EQ(std::bit_cast<uint32_t>(inplace[k]), std::bit_cast<uint32_t>(want[k]))
                << quant::isa_name(isa) << " value " << k;
    }
}

// 50 rows: one head block at a time; 1500 rows of 96 floats (560 KB): the row-span order.
INSTANTIATE_TEST_SUITE_P(Rows, HeadBlocks, ::testing::Values(50, 1500));

}  // namespace
}  // namespace ds4::ops
