// ops::attention with keys and values of different widths, with and without a sink: every ISA
// against a double-precision evaluation of the definition (absorbed-MLA shapes: 576-wide keys
// whose first 512 floats are the values; and separate value rows wider than the keys), the
// output written over the queries, and the sink path equal to ops::sink_attention bit for bit.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

#include "ops/attention.h"
#include "quant/quant.h"

namespace ds4::ops {
namespace {

// Random queries, optional sinks, key rows and value rows (values either the keys' prefix or
// rows of their own).
struct Problem {
    int H, kd, vd;
    int64_t S;
    std::vector<float> q, sinks;
    std::vector<std::vector<float>> keys, own_values;
    std::vector<const float*> kp, vp;

    Problem(int heads, int key_dim, int value_dim, int64_t rows, bool prefix_values, unsigned seed)
        : H(heads), kd(key_dim), vd(value_dim), S(rows), q(size_t(heads * key_dim)), sinks(size_t(heads)) {
        std::mt19937 rng(seed);
        std::normal_distribution<float> g;
        for (auto& v : q) v = g(rng);
        for (auto& v : sinks) v = 2.0f * g(rng);
        keys.assign(size_t(S), std::vector<float>(size_t(kd)));
        for (auto& r : keys) {
            for (auto& v : r) v = g(rng);
            kp.push_back(r.data());
        }
        if (prefix_values) {
            vp = kp;
        } else {
            own_values.assign(size_t(S), std::vector<float>(size_t(vd)));
            for (auto& r : own_values) {
                for (auto& v : r) v = g(rng);
                vp.push_back(r.data());
            }
        }
    }
    AttentionRows rows() const { return {kp.data(), vp.data(), S, kd, vd}; }

    // out[h] = sum_s softmax(q_h.key_s*scale | sink_h) value_s, in double.
    std::vector<double> definition(bool sink, float scale) const {
        std::vector<double> out(size_t(H * vd), 0.0);
        for (int h = 0; h < H; ++h) {
            std::vector<double> l(static_cast<size_t>(S));
            double mx = sink ? sinks[size_t(h)] : -INFINITY;
            for (int64_t s = 0; s < S; ++s) {
                double d = 0;
                for (int k = 0; k < kd; ++k) d += double(q[size_t(h * kd + k)]) * kp[size_t(s)][k];
                l[size_t(s)] = d * scale;
                mx = std::max(mx, l[size_t(s)]);
            }
            double den = sink ? std::exp(sinks[size_t(h)] - mx) : 0.0;
            for (auto& v : l) den += (v = std::exp(v - mx));
            for (int64_t s = 0; s < S; ++s)
                for (int k = 0; k < vd; ++k) out[size_t(h * vd + k)] += l[size_t(s)] / den * vp[size_t(s)][k];
        }
        return out;
    }
};

struct Case {
    int heads, kd, vd;
    int64_t rows;
    bool prefix;  // values = the keys' first vd floats
};

TEST(Attention, KeyAndValueWidthsMayDifferWithOrWithoutSink) {
    const Case cases[] = {{4, 576, 512, 37, true},  {5, 576, 512, 300, true}, {3, 72, 40, 9, true},
                          {6, 40, 72, 130, false},  {1, 24, 100, 5, false},   {9, 100, 37, 700, false},
                          {2, 576, 512, 1100, true}};  // past 512 KB of rows: the row-span order
    unsigned seed = 1;
    for (const Case& c : cases)
        for (bool sink : {true, false}) {
            const Problem p(c.heads, c.kd, c.vd, c.rows, c.prefix, seed++);
            const float scale = 1.0f / std::sqrt(float(c.kd));
            const auto exact = p.definition(sink, scale);
            for (int i = 0; i < quant::kIsaCount; ++i) {
                const quant::Isa isa = quant::Isa(i);
                if (!quant::isa_supported(isa)) continue;
                std::vector<float> out(size_t(c.heads * c.vd), NAN);
                attention(p.q.data(), c.heads, p.rows(), sink ? p.sinks.data() : nullptr, scale, out.data(), isa);
                double worst = 0;
                for (size_t k = 0; k < out.size(); ++k) {
                    ASSERT_TRUE(std::isfinite(out[k])) << quant::isa_name(isa);
                    worst = std::max(worst, std::abs(out[k] - exact[k]));
                }
                EXPECT_LT(worst, 2e-5) << quant::isa_name(isa) << " heads " << c.heads << " kd " << c.kd << " vd "
                                       << c.vd << " rows " << c.rows << (sink ? " sink" : " no sink");
            }
        }
}

// Without a sink the weights sum to one: a row whose logit dominates gives its value (with a
// sink they would not); no rows give zeros.
TEST(Attention, WithoutASinkTheWeightsSumToOne) {
    Problem p(2, 16, 8, 3, false, 7);
    for (auto& v : p.q) v = 0.0f;  // equal logits: the mean of the values
    std::vector<float> out(16);
    attention(p.q.data(), 2, p.rows(), nullptr, 1.0f, out.data());
    for (int d = 0; d < 8; ++d) {
        const float mean = (p.vp[0][d] + p.vp[1][d] + p.vp[2][d]) / 3.0f;
        EXPECT_NEAR(out[size_t(d)], mean, 1e-6);
        EXPECT_NEAR(out[size_t(8 + d)], mean, 1e-6);
    }
    std::vector<float> none(16, NAN);
    attention(p.q.data(), 2, AttentionRows{nullptr, nullptr, 0, 16, 8}, nullptr, 1.0f, none.data());
    for (float v : none) EXPECT_EQ(v, 0.0f);
}

// The output may overwrite the queries when values are no wider than keys (the forward pass
// does this): the same bits as a separate output, for every ISA.
TEST(Attention, OutputMayOverwriteWiderQueries) {
    for (int64_t S : {50, 1500}) {
        const Problem p(9, 96, 64, S, true, 11);
        for (int i = 0; i < quant::kIsaCount; ++i) {
            const quant::Isa isa = quant::Isa(i);
            if (!quant::isa_supported(isa)) continue;
            std::vector<float> want(size_t(9 * 64)), inplace = p.q;
            attention(p.q.data(), 9, p.rows(), p.sinks.data(), 0.1f, want.data(), isa);
            attention(inplace.data(), 9, p.rows(), p.sinks.data(), 0.1f, inplace.data(), isa);
            for (size_t k = 0; k < want.size(); ++k)
                ASSERT_EQ(std::bit_cast<uint32_t>(inplace[k]), std::bit_cast<uint32_t>(want[k]))
                    << quant::isa_name(isa) << " rows " << S << " value " << k;
        }
    }
}

// sink_attention is attention over shared rows with a sink: the same bits.
TEST(Attention, SinkAttentionIsTheSharedRowsCase) {
    const Problem p(7, 80, 80, 200, true, 13);
    for (int i = 0; i < quant::kIsaCount; ++i) {
        const quant::Isa isa = quant::Isa(i);
        if (!quant::isa_supported(isa)) continue;
        std::vector<float> a(size_t(7 * 80)), b(a.size());
        attention(p.q.data(), 7, p.rows(), p.sinks.data(), 0.2f, a.data(), isa);
        sink_attention(p.q.data(), 7, 80, p.kp.data(), p.S, p.sinks.data(), 0.2f, b.data(), isa);
        for (size_t k = 0; k < a.size(); ++k) ASSERT_EQ(std::bit_cast<uint32_t>(a[k]), std::bit_cast<uint32_t>(b[k]));
    }
}

}  // namespace
}  // namespace ds4::ops
