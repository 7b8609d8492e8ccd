// engine::Engine on a generated tiny model: sync() reuses the live prefix and evaluates only
// the rest, with logits equal to a fresh run's; generate() stops for each reason and leaves a
// session that the next sync() completes.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "model/deepseek4/model.h"
#include "gguf/reader.h"
#include "sampling/sampler.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"
#include "tokenizer/tokenizer.h"

namespace ds4::engine {
namespace {

class EngineTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        const std::string p = dir_->file("tiny.gguf");
        const auto r = test::write_tiny_model(p, {"--indexer-heads", "16"});
        ASSERT_EQ(r.exit_code, 0) << r.output;
        model_ = deepseek4::Model::load(p, {.threads = 2}).release();
        tok_ = tokenizer::Tokenizer::from_gguf(model_->file()).release();
    }
    static void TearDownTestSuite() {
        delete tok_;
        delete model_;
        delete dir_;
    }
    static std::vector<int32_t> ids(size_t n, uint64_t seed) {
        // Avoid EOS so forced/greedy runs are not cut short by chance.
        auto v = test::random_token_ids(n, model_->config().n_vocab, seed);
        for (auto& t : v)
            if (t == tok_->special().eos) t = 1;
        return v;
    }
    // Greedy next token after `prefix`, from a fresh session.
    static int32_t fresh_argmax(const std::vector<int32_t>& prefix) {
        model::Session s(*model_, {.ctx = 1024});
        std::vector<float> logits;
        s.eval(prefix, &logits);
        return sampling::argmax(logits);
    }
    static Engine make() { return Engine(*model_, *tok_, {.ctx = 1024, .prefill_chunk = 64}); }

    static test::TempDir* dir_;
    static deepseek4::Model* model_;
    static tokenizer::Tokenizer* tok_;
};
test::TempDir* EngineTest::dir_ = nullptr;
deepseek4::Model* EngineTest::model_ = nullptr;
tokenizer::Tokenizer* EngineTest::tok_ = nullptr;

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

TEST_F(EngineTest, SyncReusesTheLivePrefix) {
    Engine e = make();
    const auto a = ids(150, 1), b = ids(40, 2), c = ids(30, 3);
    auto r = e.sync(a);
    EXPECT_EQ(r.reused, 0);
    EXPECT_EQ(r.evaluated, 150);
    r = e.sync(concat(a, b));  // a follow-up turn: only the suffix
    EXPECT_EQ(r.reused, 150);
    EXPECT_EQ(r.evaluated, 40);
    r = e.sync(concat(a, b));  // nothing new
    EXPECT_EQ(r.evaluated, 0);
    r = e.sync(concat(a, c));  // diverges after a: rewinds, evaluates c
    EXPECT_EQ(r.reused, 150);
    EXPECT_EQ(r.evaluated, 30);
    r = e.sync(a);             // a prefix of what is held: the last position is evaluated again
    EXPECT_EQ(r.reused, 149);
    EXPECT_EQ(r.evaluated, 1);

    // The ready logits are those of a fresh run over the same tokens.
    int32_t got = -1;
    e.generate({.sampling = {.temperature = 0}, .max_tokens = 1}, [&](int32_t id) {
        got = id;
        return true;
    });
    EXPECT_EQ(got, fresh_argmax(a));
}

TEST_F(EngineTest, GreedyGenerationEqualsFreshArgmaxes) {
    Engine e = make();
    auto transcript = ids(60, 4);
    e.sync(transcript);
    std::vector<int32_t> out;
    const auto r = e.generate({.sampling = {.temperature = 0}, .max_tokens = 6}, [&](int32_t id) {
        out.push_back(id);
        return true;
    });
    EXPECT_EQ(r.reason, StopReason::Length);
    ASSERT_EQ(r.emitted, 6);
    for (int32_t id : out) {
        if (id == tok_->special().eos) break;
        EXPECT_EQ(id, fresh_argmax(transcript));
        transcript.push_back(id);
    }
    // The next turn: the whole transcript plus new tokens; only what the session lacks is
    // evaluated (the last emitted token and the new ones).
    const auto more = ids(10, 5);
    const auto s = e.sync(concat(transcript, more));
    EXPECT_EQ(s.reused, int64_t(transcript.size()) - 1);
    EXPECT_EQ(s.evaluated, 11);
}

// Proposes a recorded continuation, with every `wrong_every`-th proposal replaced by a wrong
// token (0: never), as a speculative drafter would.
class RecordedDrafter : public Drafter {
public:
    RecordedDrafter(std::vector<int32_t> transcript, int wrong_every, int32_t n_vocab)
        : t_(std::move(transcript)), wrong_every_(wrong_every), n_vocab_(n_vocab) {}
    Draft propose(std::span<const int32_t> history, int32_t, int max) override {
        Draft d;
        std::vector<int32_t>& out = d.tokens;
        for (size_t at = history.size() + 1; at < t_.size() && int(out.size()) < max; ++at) {
            int32_t id = t_[at];
            if (wrong_every_ > 0 && ++n_ % wrong_every_ == 0) id = (id + 1) % n_vocab_;
            out.push_back(id);
        }
        return d;
    }

private:
    std::vector<int32_t> t_;
    int wrong_every_;
    int32_t n_vocab_;
    int n_ = 0;
};

// Speculative verification on the real forward pass: the pending token and its drafts are
// evaluated in one multi-row step and the sequence is rewound to the accepted rows; greedy
// output and the state left behind equal plain decoding's.
TEST_F(EngineTest, VerifiedDraftsGiveThePlainGreedyOutput) {
    const auto prompt = ids(80, 8);
    const GenerateOptions greedy{.sampling = {.temperature = 0}, .max_tokens = 24};
    Engine plain = make();
    plain.sync(prompt);
    std::vector<int32_t> want;
    plain.generate(greedy, [&](int32_t id) { want.push_back(id); return true; });
    const std::vector<int32_t> transcript = concat(prompt, want);
    const std::vector<int32_t> held = plain.tokens();

    for (int wrong_every : {0, 3}) {
        SCOPED_TRACE(wrong_every);
        RecordedDrafter d(transcript, wrong_every, int32_t(model_->config().n_vocab));
        GenerateOptions o = greedy;
        o.max_draft = 4;
        Engine e = make();
        e.set_drafter(&d);
        e.sync(prompt);
        std::vector<int32_t> got;
        const auto r = e.generate(o, [&](int32_t id) { got.push_back(id); return true; });
        EXPECT_EQ(got, want);
        EXPECT_EQ(r.reason, want.size() == 24 ? StopReason::Length : StopReason::Eos);
        EXPECT_GT(e.usage().drafted, 0);
        if (wrong_every == 0) EXPECT_EQ(e.usage().accepted, e.usage().drafted);
        else EXPECT_LT(e.usage().accepted, e.usage().drafted);
        EXPECT_LT(e.usage().steps, int64_t(want.size()) - 1);  // several tokens per step
        EXPECT_EQ(e.tokens(), held);
        // The state left behind continues like plain decoding's: the next turn's logits agree.
        const auto next = concat(transcript, ids(5, 9));
        plain.sync(next);
        e.sync(next);
        int32_t a = -1, b = -1;
        plain.generate({.sampling = {.temperature = 0}, .max_tokens = 1}, [&](int32_t id) { a = id; return true; });
        e.generate({.sampling = {.temperature = 0}, .max_tokens = 1}, [&](int32_t id) { b = id; return true; });
        EXPECT_EQ(a, b);
    }
}

TEST_F(EngineTest, StopReasons) {
    Engine e = make();
    const auto prompt = ids(20, 6);
    e.sync(prompt);
    const std::vector<int32_t> forced = {5, 6, 7};
    std::vector<int32_t> out;
    auto keep = [&](int32_t id) { out.push_back(id); return true; };
    auto r = e.generate({.forced = &forced}, keep);
    EXPECT_EQ(r.reason, StopReason::ForcedEnd);
    EXPECT_EQ(out, forced);

    const std::vector<int32_t> with_eos = {9, tok_->special().eos, 10};
    e.sync(prompt);
    out.clear();
    r = e.generate({.forced = &with_eos}, keep);
    EXPECT_EQ(r.reason, StopReason::Eos);
    EXPECT_EQ(out, std::vector<int32_t>{9});

    e.sync(prompt);
    r = e.generate({.forced = &forced}, [&](int32_t) { return false; });
    EXPECT_EQ(r.reason, StopReason::Caller);
    EXPECT_EQ(r.emitted, 1);

    std::atomic<bool> cancel{true};
    e.sync(prompt);
    r = e.generate({.cancel = &cancel, .forced = &forced}, keep);
    EXPECT_EQ(r.reason, StopReason::Cancelled);
    EXPECT_EQ(r.emitted, 0);

    // A context that holds the prompt and two more positions.
    Engine small(*model_, *tok_, {.ctx = 23});
    small.sync(prompt);
    const std::vector<int32_t> many(10, 5);
    r = small.generate({.forced = &many}, [](int32_t) { return true; });
    EXPECT_EQ(r.reason, StopReason::ContextFull);
    EXPECT_EQ(r.emitted, 3);  // positions 20, 21, 22
}

TEST_F(EngineTest, BadRequests) {
    Engine e = make();
    EXPECT_THROW(e.sync({}), Error);
    EXPECT_THROW(e.sync(ids(1024, 7)), Error);  // no room for a reply
    EXPECT_THROW(e.sync({-3}), Error);
    EXPECT_EQ(e.pos(), 0);
    EXPECT_THROW(e.generate({}, [](int32_t) { return true; }), Error);  // no sync yet

    // Cancelled between chunks: a prefix of the prompt is held, and a later sync completes it.
    std::atomic<bool> cancel{false};
    const auto p = ids(200, 8);
    const auto r = e.sync(p, [&](int64_t done, int64_t) { if (done >= 64) cancel = true; }, &cancel);
    EXPECT_TRUE(r.cancelled);
    EXPECT_EQ(e.pos(), 64);
    EXPECT_EQ(e.sync(p).evaluated, 136);
}

}  // namespace
}  // namespace ds4::engine
