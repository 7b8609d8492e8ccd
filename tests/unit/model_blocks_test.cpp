// The family-neutral blocks of src/model/blocks: the router's gating functions, selection bias,
// normalisation and scale; top-k selection and the indexer's row selector; the SwiGLU FFN and
// the routed-expert executor (against direct computations, and bit-identical across grouping,
// batching and the shared-expert/dense equivalence); the attention rounds' order of work; the
// batch checks.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "common/error.h"
#include "model/blocks/attention_rounds.h"
#include "model/blocks/batch_check.h"
#include "model/blocks/routed_ffn.h"
#include "model/blocks/router.h"
#include "model/blocks/rows.h"
#include "model/blocks/swiglu_ffn.h"
#include "model/blocks/top_k.h"
#include "model/blocks/workspace.h"
#include "ops/indexer.h"

namespace ds4::blocks {
namespace {

std::vector<float> normal(size_t n, unsigned seed, float scale = 1.0f) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, scale);
    std::vector<float> v(n);
    for (auto& x : v) x = g(rng);
    return v;
}

// ---------------------------------------------------------------------------------------------
// Router

TEST(Router, GatingFunctions) {
    const std::vector<float> logits = {-3.0f, -0.5f, 0.0f, 0.7f, 2.0f, 25.0f};
    const int64_t E = int64_t(logits.size());
    std::vector<float> p(logits.size());
    Router({.gating = Gating::SqrtSoftplus, .n_expert = E, .n_used = 2}).score(logits.data(), p.data());
    for (size_t e = 0; e < logits.size(); ++e) {
        const double sp = logits[e] > 20 ? logits[e] : std::log1p(std::exp(double(logits[e])));
        EXPECT_NEAR(p[e], std::sqrt(sp), 1e-6) << e;
    }
    Router({.gating = Gating::Sigmoid, .n_expert = E, .n_used = 2}).score(logits.data(), p.data());
    for (size_t e = 0; e < logits.size(); ++e) EXPECT_NEAR(p[e], 1.0 / (1.0 + std::exp(-double(logits[e]))), 1e-7);
    Router({.gating = Gating::Softmax, .n_expert = E, .n_used = 2}).score(logits.data(), p.data());
    double den = 0;
    for (float l : logits) den += std::exp(double(l) - 25.0);
    for (size_t e = 0; e < logits.size(); ++e) EXPECT_NEAR(p[e], std::exp(double(logits[e]) - 25.0) / den, 1e-7);
    EXPECT_NEAR(std::accumulate(p.begin(), p.end(), 0.0), 1.0, 1e-6);
}

// The bias decides which experts are chosen, never how much they weigh; normalisation divides
// by the chosen (unbiased) scores; the scale comes last.
TEST(Router, BiasChoosesNormalisationAndScaleWeigh) {
    const std::vector<float> logits = {1.0f, 0.5f, -1.0f, 0.2f};
    const std::vector<float> bias = {0.0f, 0.0f, 10.0f, 0.0f};  // expert 2 always chosen first
    const RouterParams glm{.gating = Gating::Sigmoid, .n_expert = 4, .n_used = 2, .selection_bias = bias.data(),
                           .normalize = true, .scale = 2.5f};
    RouterScratch s;
    Route r;
    Router(glm).route(logits.data(), s, r);
    ASSERT_EQ(r.chosen, (std::vector<int32_t>{2, 0}));
    auto sig = [](double x) { return 1.0 / (1.0 + std::exp(-x)); };
    const double sum = sig(-1.0) + sig(1.0);
    EXPECT_NEAR(r.weight[0], sig(-1.0) / sum * 2.5, 1e-6);
    EXPECT_NEAR(r.weight[1], sig(1.0) / sum * 2.5, 1e-6);
    EXPECT_NEAR(r.weight[0] + r.weight[1], 2.5, 1e-6);
    // Margin: biased score of the last chosen minus the best left out (expert 1).
    EXPECT_NEAR(r.margin, sig(1.0) - sig(0.5), 1e-6);

    RouterParams plain = glm;
    plain.selection_bias = nullptr;
    plain.normalize = false;
    Router(plain).route(logits.data(), s, r);
    ASSERT_EQ(r.chosen, (std::vector<int32_t>{0, 1}));
    EXPECT_FLOAT_EQ(r.weight[0], float(sig(1.0)) * 2.5f);
    EXPECT_FLOAT_EQ(r.weight[1], float(sig(0.5)) * 2.5f);
}

TEST(Router, TiesGoToTheLowerIdAndAllChosenHasNoMargin) {
    const std::vector<float> logits = {0.3f, 0.9f, 0.3f, 0.9f, 0.1f};
    RouterScratch s;
    Route r;
    Router({.gating = Gating::Softmax, .n_expert = 5, .n_used = 3, .normalize = true}).route(logits.data(), s, r);
    EXPECT_EQ(r.chosen, (std::vector<int32_t>{1, 3, 0}));
    EXPECT_EQ(r.margin, 0.0f);  // expert 2 ties with expert 0
    EXPECT_NEAR(r.weight[0] + r.weight[1] + r.weight[2], 1.0, 1e-6);
    Router({.gating = Gating::Softmax, .n_expert = 5, .n_used = 5}).route(logits.data(), s, r);
    EXPECT_EQ(r.chosen, (std::vector<int32_t>{1, 3, 0, 2, 4}));
    EXPECT_TRUE(std::isnan(r.margin));
}

// ---------------------------------------------------------------------------------------------
// Top-k and the indexer's row selection

TEST(TopK, RankAndAscendingRows) {
    const std::vector<float> score = {0.5f, 2.0f, -1.0f, 2.0f, 0.7f, 0.5f};
    std::vector<int32_t> order;
    rank_top_k(score, 4, order);
    EXPECT_EQ(std::vector<int32_t>(order.begin(), order.begin() + 4), (std::vector<int32_t>{1, 3, 4, 0}));
    EXPECT_EQ(top_k_rows(score, 4), (std::vector<int32_t>{0, 1, 3, 4}));
    EXPECT_EQ(top_k_rows(score, 1), (std::vector<int32_t>{1}));
}

TEST(TopK, IndexerSelectionIsTheTopKOfTheScoresWithOrWithoutAPool) {
    const int heads = 3, dim = 64;
    const int64_t n_rows = 300, k = 17;
    const auto q = normal(size_t(heads * dim), 1), w = normal(size_t(heads), 2), keys = normal(size_t(n_rows * dim), 3);
    std::vector<float> ref(static_cast<size_t>(n_rows));
    ops::indexer_scores(q.data(), w.data(), heads, dim, keys.data(), 0, n_rows, ref.data());
    const auto want = top_k_rows(ref, k);
    std::vector<float> score;
    const IndexerQuery iq{q.data(), w.data(), heads, dim};
    EXPECT_EQ(select_rows(iq, keys.data(), n_rows, k, score), want);
    ThreadPool pool(3);
    EXPECT_EQ(select_rows(iq, keys.data(), n_rows, k, score, &pool), want);
    ASSERT_EQ(score.size(), size_t(n_rows));
    for (size_t r = 0; r < score.size(); ++r) EXPECT_EQ(score[r], ref[r]);
}

// ---------------------------------------------------------------------------------------------
// SwiGLU FFN and the routed-expert executor (F32 weights: the products are plain dot products)

struct F32Matrix {
    std::vector<float> v;
    ops::Matrix m;
    F32Matrix(int64_t rows, int64_t cols, unsigned seed)
        : v(normal(size_t(rows * cols), seed, 1.0f / std::sqrt(float(cols)))),
          m{TensorType::F32, rows, cols, reinterpret_cast<const uint8_t*>(v.data()), size_t(cols) * 4} {}
};

// down(swiglu(gate x, up x)) in double, clamp as blocks::swiglu.
std::vector<double> swiglu_direct(const ops::Matrix& gate, const ops::Matrix& up, const ops::Matrix& down, float clamp,
                                  const float* x) {
    auto W = [](const ops::Matrix& m, int64_t r, int64_t c) {
        return double(reinterpret_cast<const float*>(m.data)[r * m.cols + c]);
    };
    const int64_t F = gate.rows, D = gate.cols;
    std::vector<double> h(static_cast<size_t>(F)), y(static_cast<size_t>(D), 0.0);
    for (int64_t f = 0; f < F; ++f) {
        double g = 0, u = 0;
        for (int64_t d = 0; d < D; ++d) {
            g += W(gate, f, d) * x[d];
            u += W(up, f, d) * x[d];
        }
        if (clamp > 0) {
            g = std::min(g, double(clamp));
            u = std::clamp(u, -double(clamp), double(clamp));
        }
        h[size_t(f)] = g / (1 + std::exp(-g)) * u;
    }
    for (int64_t d = 0; d < D; ++d)
        for (int64_t f = 0; f < F; ++f) y[size_t(d)] += W(down, d, f) * h[size_t(f)];
    return y;
}

TEST(SwigluFfn, MatchesTheDirectComputation) {
    const int64_t D = 48, F = 40, n = 5;
    F32Matrix gate(F, D, 1), up(F, D, 2), down(D, F, 3);
    const auto x = normal(size_t(n * D), 4, 2.0f);
    ThreadPool pool(2);
    ScratchArena arena;
    FfnBuffers buf;
    for (float clamp : {0.0f, 0.8f}) {
        std::vector<float> out(size_t(n * D));
        swiglu_ffn({gate.m, up.m, down.m, clamp}, x.data(), n, out.data(), pool, arena, buf);
        for (int64_t t = 0; t < n; ++t) {
            const auto want = swiglu_direct(gate.m, up.m, down.m, clamp, &x[size_t(t * D)]);
            for (int64_t d = 0; d < D; ++d) EXPECT_NEAR(out[size_t(t * D + d)], want[size_t(d)], 1e-4) << clamp;
        }
    }
}

// Resident experts with a capacity (groups) and a record of hints.
class TestSource final : public model::ExpertSource {
public:
    TestSource(std::vector<model::LayerExperts> l, size_t capacity, bool hints)
        : inner_(std::move(l)), capacity_(capacity), hints_(hints) {}
    void prepare(uint32_t layer, std::span<const int32_t> e, std::span<const int32_t> rows) override {
        prepared.push_back(std::vector<int32_t>(e.begin(), e.end()));
        inner_.prepare(layer, e, rows);
    }
    model::ExpertWeights expert(uint32_t layer, int32_t e) const override { return inner_.expert(layer, e); }
    size_t capacity() const override { return capacity_; }
    bool wants_hints() const override { return hints_; }
    std::vector<std::vector<int32_t>> prepared;

private:
    model::ResidentExperts inner_;
    size_t capacity_;
    bool hints_;
};

struct MoeFixture {
    static constexpr int64_t E = 6, K = 2, D = 32, F = 24, FS = 20;
    F32Matrix gate{E * F, D, 11}, up{E * F, D, 12}, down{E * D, F, 13};
    F32Matrix sg{FS, D, 14}, su{FS, D, 15}, sd{D, FS, 16};
    SwigluWeights shared{sg.m, su.m, sd.m, 0.9f};

    std::vector<model::LayerExperts> layers() const {
        return {{{gate.m, F}, {up.m, F}, {down.m, D}}};
    }
    RoutedFfnSpec spec(bool with_shared) const {
        return {.layer = 0, .n_expert = E, .n_used = K, .n_embd = D, .ff = F, .clamp = 1.5f,
                .shared = with_shared ? &shared : nullptr};
    }
    std::vector<Route> routes(const std::vector<float>& logits, int64_t n) const {
        const Router router({.gating = Gating::Sigmoid, .n_expert = E, .n_used = K, .normalize = true, .scale = 2.5f});
        std::vector<Route> r(static_cast<size_t>(n));
        RouterScratch s;
        for (int64_t t = 0; t < n; ++t) router.route(&logits[size_t(t * E)], s, r[size_t(t)]);
        return r;
    }
    // The combined FFN output of n rows.
    std::vector<float> run(const float* x, int64_t n, const std::vector<Route>& routes, model::ExpertSource& src,
                           ThreadPool& pool, bool with_shared, const std::function<void()>& hint = {}) const {
        ScratchArena arena;
        FfnBuffers buf;
        const auto o = run_routed_experts(spec(with_shared), x, n, routes, src, pool, arena, buf, hint);
        std::vector<float> out(size_t(n * D));
        combine_experts(o, routes, pool, [&](int64_t t, const float* Fv) {
            std::memcpy(&out[size_t(t * D)], Fv, sizeof(float) * D);
        });
        return out;
    }
};

TEST(RoutedFfn, MatchesTheDirectComputation) {
    MoeFixture f;
    const int64_t n = 7;
    const auto x = normal(size_t(n * f.D), 21, 2.0f), logits = normal(size_t(n * f.E), 22);
    const auto routes = f.routes(logits, n);
    TestSource src(f.layers(), SIZE_MAX, false);
    ThreadPool pool(3);
    const auto out = f.run(x.data(), n, routes, src, pool, true);
    for (int64_t t = 0; t < n; ++t) {
        std::vector<double> want = swiglu_direct(f.sg.m, f.su.m, f.sd.m, 0.9f, &x[size_t(t * f.D)]);
        for (int64_t k = 0; k < f.K; ++k) {
            const int32_t e = routes[size_t(t)].chosen[size_t(k)];
            const auto ye = swiglu_direct(f.gate.m.slice_rows(e * f.F, f.F), f.up.m.slice_rows(e * f.F, f.F),
                                          f.down.m.slice_rows(e * f.D, f.D), 1.5f, &x[size_t(t * f.D)]);
            for (int64_t d = 0; d < f.D; ++d) want[size_t(d)] += routes[size_t(t)].weight[size_t(k)] * ye[size_t(d)];
        }
        for (int64_t d = 0; d < f.D; ++d) EXPECT_NEAR(out[size_t(t * f.D + d)], want[size_t(d)], 2e-4) << t;
    }
    // One prepare for the call: the distinct experts, ascending.
    ASSERT_EQ(src.prepared.size(), 1u);
    std::set<int32_t> used;
    for (const Route& r : routes) used.insert(r.chosen.begin(), r.chosen.end());
    EXPECT_EQ(src.prepared[0], std::vector<int32_t>(used.begin(), used.end()));
}

// Groups (a source of small capacity), batching and the thread count change no bit; hints are
// asked only of a source that wants them, once, when the call fits one group.
TEST(RoutedFfn, GroupsBatchesAndThreadsChangeNoBit) {
    MoeFixture f;
    const int64_t n = 9;
    const auto x = normal(size_t(n * f.D), 31, 2.0f), logits = normal(size_t(n * f.E), 32);
    const auto routes = f.routes(logits, n);
    ThreadPool pool1(1), pool3(3);
    TestSource whole(f.layers(), SIZE_MAX, true), small(f.layers(), 2, true);
    int hints_whole = 0, hints_small = 0;
    const auto a = f.run(x.data(), n, routes, whole, pool3, true, [&] { ++hints_whole; });
    const auto b = f.run(x.data(), n, routes, small, pool1, true, [&] { ++hints_small; });
    EXPECT_EQ(hints_whole, 1);
    EXPECT_EQ(hints_small, 0);
    EXPECT_GT(small.prepared.size(), 1u);
    for (const auto& g : small.prepared) EXPECT_LE(g.size(), 2u);
    for (size_t i = 0; i < a.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(a[i]), std::bit_cast<uint32_t>(b[i])) << i;
    for (int64_t t = 0; t < n; ++t) {
        TestSource one(f.layers(), SIZE_MAX, false);
        const auto r1 = std::vector<Route>{routes[size_t(t)]};
        const auto alone = f.run(&x[size_t(t * f.D)], 1, r1, one, pool3, true);
        for (int64_t d = 0; d < f.D; ++d)
            ASSERT_EQ(std::bit_cast<uint32_t>(alone[size_t(d)]), std::bit_cast<uint32_t>(a[size_t(t * f.D + d)]));
    }
}

// The shared expert is the dense SwiGLU FFN: with every routing weight zero, the executor's
// output is swiglu_ffn's, bit for bit; without a shared expert the output is the routed sum.
TEST(RoutedFfn, SharedExpertIsTheDenseFfn) {
    MoeFixture f;
    const int64_t n = 4;
    const auto x = normal(size_t(n * f.D), 41, 2.0f), logits = normal(size_t(n * f.E), 42);
    auto routes = f.routes(logits, n);
    for (Route& r : routes) std::fill(r.weight.begin(), r.weight.end(), 0.0f);
    ThreadPool pool(2);
    TestSource src(f.layers(), SIZE_MAX, false);
    const auto moe = f.run(x.data(), n, routes, src, pool, true);
    ScratchArena arena;
    FfnBuffers buf;
    std::vector<float> dense(size_t(n * f.D));
    swiglu_ffn(f.shared, x.data(), n, dense.data(), pool, arena, buf);
    for (size_t i = 0; i < dense.size(); ++i) ASSERT_EQ(std::bit_cast<uint32_t>(moe[i]), std::bit_cast<uint32_t>(dense[i]));
    const auto none = f.run(x.data(), n, routes, src, pool, false);
    for (float v : none) EXPECT_EQ(v, 0.0f);
}

TEST(RoutedFfn, RefusesAnExpertOutOfRange) {
    MoeFixture f;
    const auto x = normal(size_t(f.D), 51);
    std::vector<Route> routes(1);
    routes[0].chosen = {1, int32_t(f.E)};
    routes[0].weight = {0.5f, 0.5f};
    TestSource src(f.layers(), SIZE_MAX, false);
    ThreadPool pool(1);
    EXPECT_THROW(f.run(x.data(), 1, routes, src, pool, true), Error);
    EXPECT_TRUE(src.prepared.empty());
}

// ---------------------------------------------------------------------------------------------
// Rows, batch checks and attention rounds, over a minimal Sequence

class FakeSequence final : public model::Sequence {
public:
    FakeSequence(int owner, int64_t ctx, int64_t pos) : model::Sequence({.ctx = ctx}), owner_(owner) {
        tokens_.assign(size_t(pos), 0);
    }
    bool can_rewind(int64_t) const override { return false; }
    void rewind(int64_t) override {}
    void clear() override { tokens_.clear(); }
    int64_t state_bytes() const override { return 0; }
    int64_t state_bytes_used() const override { return 0; }
    std::unique_ptr<model::Sequence> clone() const override { return nullptr; }
    void assign(const model::Sequence&) override {}
    int owner_;
};

TEST(BatchCheck, RefusesWhatTheInterfaceForbids) {
    FakeSequence a(1, 10, 3), b(1, 10, 0), foreign(2, 10, 0);
    const std::vector<int32_t> ok = {1, 2}, bad = {1, 99}, many(8, 1);
    float logits[4];
    auto ours = [](const model::Sequence& s) { return static_cast<const FakeSequence&>(s).owner_ == 1; };
    auto msg = [&](std::vector<model::BatchItem> items, bool advancing) -> std::string {
        try {
            check_batch(items, 50, advancing, ours);
        } catch (const Error& e) {
            return e.what();
        }
        return "";
    };
    EXPECT_EQ(msg({{&a, ok}, {&b, ok, model::Logits::Last, logits}}, true), "");
    EXPECT_NE(msg({{&a, ok}, {&foreign, ok}}, true).find("another model"), std::string::npos);
    EXPECT_NE(msg({{&a, ok}, {&a, ok}}, true).find("appears twice"), std::string::npos);
    EXPECT_NE(msg({{&a, {}}}, true).find("nothing to evaluate"), std::string::npos);
    EXPECT_NE(msg({{&a, bad}}, true).find("token id 99 out of range"), std::string::npos);
    EXPECT_NE(msg({{&a, many}}, true).find("context exceeded"), std::string::npos);
    EXPECT_EQ(msg({{&a, many}}, false), "");  // embed/head do not advance
    EXPECT_NE(msg({{&a, ok, model::Logits::All, nullptr}}, true).find("no buffer"), std::string::npos);
}

TEST(AttentionRounds, UpdatesInOrderEachRowAttendedOnceAfterItsBlock) {
    FakeSequence a(1, 100, 5), b(1, 100, 0);
    const std::vector<int32_t> ta(7, 1), tb(3, 1);
    const std::vector<model::BatchItem> items = {{&a, ta}, {&b, tb}};
    const Rows rows(items);
    ASSERT_EQ(rows.n, 10);
    EXPECT_EQ(rows.pos[0], 5);
    EXPECT_EQ(rows.pos[7], 0);
    EXPECT_EQ(rows.span_of[8], 1);
    for (int threads : {1, 2, 16}) {
        ThreadPool pool(threads);
        const std::vector<SequenceBlocks> seqs = {{&rows.spans[0], 3}, {&rows.spans[1], 2}};
        std::mutex mu;
        std::vector<int64_t> updated, attended, finished;
        std::vector<int> inner_pool;
        run_attention_rounds(
            pool, seqs, [&](int32_t, int64_t t) { updated.push_back(t); },
            [&](int32_t i, int64_t t, TokenScratch&, ThreadPool* inner) {
                std::lock_guard lk(mu);
                // Every row of the token's block was updated before it attends.
                const int64_t block_end =
                    std::min(rows.spans[size_t(i)].row0 + rows.spans[size_t(i)].n,
                             rows.spans[size_t(i)].row0 + ((t - rows.spans[size_t(i)].row0) / seqs[size_t(i)].size + 1) * seqs[size_t(i)].size);
                for (int64_t r = t; r < block_end; ++r)
                    EXPECT_NE(std::find(updated.begin(), updated.end(), r), updated.end());
                attended.push_back(t);
                inner_pool.push_back(inner != nullptr);
            },
            [&](int64_t t) {
                std::lock_guard lk(mu);
                EXPECT_NE(std::find(attended.begin(), attended.end(), t), attended.end());
                finished.push_back(t);
            });
        // Per sequence in position order, round by round.
        EXPECT_EQ(updated, (std::vector<int64_t>{0, 1, 2, 7, 8, 3, 4, 5, 9, 6}));
        std::sort(attended.begin(), attended.end());
        std::sort(finished.begin(), finished.end());
        std::vector<int64_t> all(10);
        std::iota(all.begin(), all.end(), 0);
        EXPECT_EQ(attended, all);
        EXPECT_EQ(finished, all);
        // Rounds of 5, 4 and 1 tokens: the pool goes to a token alone when it has more threads.
        EXPECT_EQ(std::count(inner_pool.begin(), inner_pool.end(), 1), threads == 1 ? 0 : threads == 2 ? 1 : 10);
    }
}

}  // namespace
}  // namespace ds4::blocks
