// Session semantics on a generated tiny model: chunked prefill equals token-by-token decode,
// truncation equals a fresh run, QAT keeps logits finite and close, bad requests fail cleanly.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/deepseek4/model.h"
#include "model/session.h"
#include "support/compare.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

using test::Logits;
using model::Session;
using model::SessionOptions;

// One tiny model for the whole suite (16 indexer heads: no exact score ties).
const std::string& tiny_model() {
    static test::TempDir dir;
    static const std::string path = [] {
        const std::string p = dir.file("tiny.gguf");
        const auto r = test::run_command({test::binary("ds4-gguf-gen"), "-q", "-o", p,
                                            "--preset", "tiny", "--indexer-heads", "16"});
        EXPECT_EQ(r.exit_code, 0) << r.output;
        return p;
    }();
    return path;
}

Logits run(Model& m, const std::vector<int32_t>& ids, SessionOptions opt) {
    Session s(m, opt);
    Logits out;
    out.n_vocab = m.config().n_vocab;
    out.n_tokens = int64_t(ids.size());
    s.eval(ids, &out.values, /*all_logits=*/true);
    return out;
}

TEST(Session, ChunkedPrefillEqualsTokenByTokenDecode) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    const auto ids = test::random_token_ids(300, m->config().n_vocab, 5);
    const SessionOptions base{.ctx = 512, .prefill_chunk = 1, .qat = true};
    const Logits decode = run(*m, ids, base);
    for (int64_t chunk : {7, 64, 300}) {
        SessionOptions o = base;
        o.prefill_chunk = chunk;
        const auto s = test::compare_logits(decode, run(*m, ids, o), 1e-5);
        EXPECT_EQ(s.first_divergence, -1) << "chunk " << chunk << ": " << test::describe(s);
        EXPECT_EQ(s.top1_agreement, 1.0);
    }
    // A small rewind slack makes the attention run in blocks shorter than the chunk (the raw
    // ring must still hold the block's first window): same results.
    for (int64_t slack : {0, 5}) {
        SessionOptions o = base;
        o.prefill_chunk = 64;
        o.rewind_slack = slack;
        const auto s = test::compare_logits(decode, run(*m, ids, o), 1e-5);
        EXPECT_EQ(s.first_divergence, -1) << "slack " << slack << ": " << test::describe(s);
    }
}

TEST(Session, OneThreadEqualsTwo) {
    auto m1 = Model::load(tiny_model(), {.threads = 1});
    auto m2 = Model::load(tiny_model(), {.threads = 2});
    const auto ids = test::random_token_ids(100, m1->config().n_vocab, 6);
    const Logits a = run(*m1, ids, {.ctx = 128});
    const Logits b = run(*m2, ids, {.ctx = 128});
    EXPECT_EQ(a.values, b.values);
}

// Truncation back to n after a thrown-away continuation, then the real continuation: its
// logits must equal a fresh run's bit for bit, whether the rewind is cheap (within the rings'
// slack) or recomputes the prefix. The targets sit on and around the ratio-4 and ratio-128
// window boundaries and the raw window's length.
TEST(Session, TruncateThenContinueEqualsAFreshRun) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    const int64_t V = m->config().n_vocab;
    const auto ids = test::random_token_ids(420, V, 7);
    const auto other = test::random_token_ids(300, V, 8);
    const SessionOptions opt{.ctx = 1024, .prefill_chunk = 32, .rewind_slack = 100};
    const Logits fresh = run(*m, ids, opt);

    struct Case { int64_t n, thrown; bool cheap; };
    const Case cases[] = {{131, 80, true},  {128, 1, true},   {127, 5, true},  {256, 100, true},
                          {255, 97, true},  {3, 40, true},    {0, 30, true},   {131, 101, false},
                          {200, 300, false}, {129, 250, false}};
    for (const Case& c : cases) {
        Session s(*m, opt);
        if (c.n > 0) s.eval(std::vector<int32_t>(ids.begin(), ids.begin() + c.n), nullptr);
        s.eval(std::vector<int32_t>(other.begin(), other.begin() + c.thrown), nullptr);
        EXPECT_EQ(s.can_rewind(c.n), c.cheap) << "n " << c.n << " thrown " << c.thrown;
        s.truncate(c.n);
        EXPECT_EQ(s.pos(), c.n);
        std::vector<float> tail;
        const int64_t more = 150;
        s.eval(std::vector<int32_t>(ids.begin() + c.n, ids.begin() + c.n + more), &tail,
               /*all_logits=*/true);
        ASSERT_EQ(tail.size(), size_t(more * V));
        for (int64_t i = 0; i < int64_t(tail.size()); ++i)
            ASSERT_EQ(tail[size_t(i)], fresh.values[size_t(c.n * V + i)])
                << "n " << c.n << " thrown " << c.thrown << ": at value " << i;
    }
}

TEST(Session, SnapshotRestoreComesBackExactly) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    const int64_t V = m->config().n_vocab;
    const auto ids = test::random_token_ids(300, V, 10);
    const SessionOptions opt{.ctx = 1024, .prefill_chunk = 64, .rewind_slack = 0};
    const Logits fresh = run(*m, ids, opt);

    Session s(*m, opt);
    s.eval(std::vector<int32_t>(ids.begin(), ids.begin() + 140), nullptr);
    const auto snap = s.snapshot();
    EXPECT_GT(s.state_bytes(), 0);
    // A decode probe far beyond any slack, then back.
    std::vector<float> logits;
    for (int32_t t : test::random_token_ids(200, V, 11)) s.eval({t}, &logits);
    s.restore(*snap);
    EXPECT_EQ(s.pos(), 140);
    std::vector<float> tail;
    s.eval(std::vector<int32_t>(ids.begin() + 140, ids.end()), &tail, /*all_logits=*/true);
    for (int64_t i = 0; i < int64_t(tail.size()); ++i)
        ASSERT_EQ(tail[size_t(i)], fresh.values[size_t(140 * V + i)]) << "at value " << i;

    Session other(*m, {.ctx = 512});
    EXPECT_THROW(other.restore(*snap), Error) << "a snapshot of different options restored";
}

TEST(Session, UsedStateGrowsWithPositionsAndFollowsRewinds) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    const auto ids = test::random_token_ids(300, m->config().n_vocab, 12);
    Session s(*m, {.ctx = 512});
    EXPECT_EQ(s.state_bytes_used(), 0);
    std::vector<int64_t> used;
    for (int64_t n : {10, 100, 300}) {
        if (n > s.pos()) s.eval(std::vector<int32_t>(ids.begin() + s.pos(), ids.begin() + n), nullptr);
        used.push_back(s.state_bytes_used());
    }
    // Not monotonic position by position (a ratio-128 compressor's open window empties at every
    // 128th position), but compressed rows accumulate.
    EXPECT_LT(used[0], used[1]);
    EXPECT_LT(used[0], used[2]);
    EXPECT_LT(used[2], s.state_bytes());  // allocated for 512 positions plus slack
    s.truncate(100);
    EXPECT_EQ(s.state_bytes_used(), used[1]);
}

TEST(Session, CommonPrefix) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    Session s(*m, {.ctx = 64});
    s.eval({5, 6, 7, 8}, nullptr);
    EXPECT_EQ(s.common_prefix({5, 6, 9}), 2);
    EXPECT_EQ(s.common_prefix({5, 6, 7, 8, 9}), 4);
    EXPECT_EQ(s.common_prefix({}), 0);
    EXPECT_EQ(s.common_prefix({1}), 0);
}

TEST(Session, QatSimulationKeepsLogitsFiniteAndClose) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    const auto ids = test::random_token_ids(300, m->config().n_vocab, 9);
    const Logits off = run(*m, ids, {.ctx = 512, .prefill_chunk = 64, .qat = false});
    const Logits on = run(*m, ids, {.ctx = 512, .prefill_chunk = 64, .qat = true});
    for (float v : on.values) ASSERT_TRUE(std::isfinite(v));
    const auto s = test::compare_logits(off, on, 1e-3);
    std::printf("QAT on vs off: %s\n", test::describe(s).c_str());
    EXPECT_NE(s.worst_max_abs_diff, 0.0) << "the simulation changed nothing";
    EXPECT_LT(s.median_kl, 0.5);
}

TEST(Session, RejectsBadRequests) {
    auto m = Model::load(tiny_model(), {.threads = 2});
    Session s(*m, {.ctx = 16});
    EXPECT_THROW(s.eval({int32_t(m->config().n_vocab)}, nullptr), Error);
    EXPECT_THROW(s.eval({-1}, nullptr), Error);
    EXPECT_THROW(s.eval(std::vector<int32_t>(17, 1), nullptr), Error);
    EXPECT_EQ(s.pos(), 0);  // nothing was evaluated
    s.eval(std::vector<int32_t>(16, 1), nullptr);
    try {
        s.eval({1}, nullptr);
        FAIL() << "context overflow accepted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("context"), std::string::npos) << e.what();
    }
    EXPECT_THROW(s.truncate(17), Error);
}

}  // namespace
}  // namespace ds4::deepseek4
