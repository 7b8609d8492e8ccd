// The MTP drafter on a generated model with an MTP head in both layouts (ds4-gguf-gen
// --mtp-embedded --mtp-out): greedy output with drafts equals plain decoding at every draft
// depth and prefill chunk, and the drafter's proposals are the head's own over the window,
// computed directly from the trunk's hidden states, after a prompt and after verified steps.
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "engine/generator.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/mtp.h"
#include "model/state_file.h"
#include "sampling/sampler.h"
#include "speculative/mtp_drafter.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::speculative {
namespace {

class MtpDrafterTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        support_ = dir_->file("mtp.gguf");
        // Window 8 so that the 40-token prompt and the replies wrap the head's window.
        const std::string path = test::generate_model(
            *dir_, "model.gguf", {"--preset", "tiny", "--window", "8", "--mtp-embedded", "--mtp-out", support_});
        model_ = deepseek4::Model::load(path, {.threads = 2}).release();
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dir_;
    }

    struct Run {
        std::vector<int32_t> out;
        engine::GeneratorUsage usage;
        DrafterStats stats;
    };
    // Greedy decoding of n tokens after `prompt`; with a head, through an MtpDrafter.
    static Run decode(const std::vector<int32_t>& prompt, int64_t n, deepseek4::MtpHead* head, int max_draft,
                      int64_t chunk) {
        const model::SequenceOptions so{.ctx = 256, .qat = true, .rewind_slack = 32};
        auto seq = model_->new_sequence(so);
        engine::Generator g(*seq, {.n_vocab = model_->config().n_vocab, .eos = -1,
                                   .hidden_size = model_->info().hidden_size});
        std::unique_ptr<MtpDrafter> d;
        if (head) {
            d = std::make_unique<MtpDrafter>(*head, so, MtpDrafterOptions{.margin = 0});
            g.set_drafter(d.get());
        }
        auto eval = [&](const engine::Generator::Rows& r) {
            const model::BatchItem it = r.item(seq.get());
            model_->eval(model::Batch(&it, 1));
            g.evaluated();
        };
        g.set_prompt(prompt);
        while (!g.ready()) eval(g.next(chunk));
        g.begin({.sampling = {.temperature = 0}, .max_tokens = n, .max_draft = max_draft});
        Run r;
        while (!g.advance([&](int32_t id) { r.out.push_back(id); return true; })) eval(g.next(chunk));
        r.usage = g.usage();
        if (d) r.stats = d->stats();
        return r;
    }

    // The trunk's final hidden states of every position of `ids`, in one call.
    static std::vector<float> hidden_of(const std::vector<int32_t>& ids) {
        auto seq = model_->new_sequence({.ctx = 256});
        std::vector<float> h(ids.size() * size_t(model_->info().hidden_size));
        const model::BatchItem it{.seq = seq.get(), .tokens = ids, .hidden_want = model::Logits::All, .hidden = h.data()};
        model_->eval(model::Batch(&it, 1));
        return h;
    }

    // The head's greedy drafts after `history` + `next`, computed directly: rows
    // (h_{q-1}, x_q) for q = from .. end in one call, then recursion on its own output.
    static std::vector<int32_t> direct_drafts(deepseek4::MtpHead& head, const std::vector<int32_t>& history,
                                              int32_t next, int64_t from, int depth) {
        const int64_t end = int64_t(history.size()), W = model_->info().hidden_size, V = model_->config().n_vocab;
        const std::vector<float> h = hidden_of(history);
        std::vector<int32_t> toks(history.begin() + from, history.end());
        toks.push_back(next);
        auto seq = head.new_sequence({.ctx = 256});
        std::vector<float> logits(static_cast<size_t>(V)), y(static_cast<size_t>(W));
        head.eval(*seq, toks, h.data() + (from - 1) * W, y.data(), logits.data(), model::Logits::Last);
        std::vector<int32_t> out;
        for (int i = 0; i < depth; ++i) {
            out.push_back(sampling::argmax(logits));
            if (i + 1 == depth) break;
            const int32_t row[1] = {out.back()};
            std::vector<float> y2(static_cast<size_t>(W));
            head.eval(*seq, row, y.data(), y2.data(), logits.data(), model::Logits::Last);
            y = y2;
        }
        (void)end;
        return out;
    }

    static test::TempDir* dir_;
    static std::string support_;
    static deepseek4::Model* model_;
};
test::TempDir* MtpDrafterTest::dir_ = nullptr;
std::string MtpDrafterTest::support_;
deepseek4::Model* MtpDrafterTest::model_ = nullptr;

TEST_F(MtpDrafterTest, GreedyOutputIsThePlainOutputAtDepths1To8AndChunks1And64) {
    const std::vector<int32_t> prompt = test::random_token_ids(40, model_->config().n_vocab, 7);
    const Run plain = decode(prompt, 48, nullptr, 0, 64);
    auto support = deepseek4::MtpHead::open(*model_, support_);
    auto embedded = deepseek4::MtpHead::embedded(*model_);
    ASSERT_TRUE(embedded);
    struct Case {
        deepseek4::MtpHead* head;
        int depth;
        int64_t chunk;
    };
    for (const Case& c : {Case{support.get(), 1, 64}, Case{support.get(), 3, 1}, Case{support.get(), 8, 64},
                          Case{embedded.get(), 2, 64}, Case{embedded.get(), 8, 1}}) {
        SCOPED_TRACE(testing::Message() << "layout " << int(c.head->layout()) << " depth " << c.depth << " chunk "
                                        << c.chunk);
        const Run r = decode(prompt, 48, c.head, c.depth, c.chunk);
        EXPECT_EQ(r.out, plain.out);
        EXPECT_GT(r.usage.drafted, 0);
        EXPECT_EQ(r.usage.drafted, r.stats.drafted);
        EXPECT_LE(r.usage.accepted, r.usage.drafted);
    }
}

TEST_F(MtpDrafterTest, ProposalsAreTheHeadsOwnOverTheWindow) {
    auto head = deepseek4::MtpHead::open(*model_, support_);
    const int64_t window = model_->config().window;
    const model::SequenceOptions so{.ctx = 256, .qat = true, .rewind_slack = 32};
    auto seq = model_->new_sequence(so);
    engine::Generator g(*seq, {.n_vocab = model_->config().n_vocab, .eos = -1, .hidden_size = model_->info().hidden_size});
    MtpDrafter d(*head, so, {.margin = 0});
    g.set_drafter(&d);
    const std::vector<int32_t> prompt = test::random_token_ids(40, model_->config().n_vocab, 9);
    auto eval = [&](const engine::Generator::Rows& r) {
        const model::BatchItem it = r.item(seq.get());
        model_->eval(model::Batch(&it, 1));
        g.evaluated();
    };
    g.set_prompt(prompt);
    while (!g.ready()) eval(g.next(16));
    // After the prompt: the head's rows restart at end - window + 1.
    const int32_t next = sampling::argmax(g.ready_logits());
    const engine::Draft first = d.propose(seq->tokens(), next, 4);
    ASSERT_EQ(first.tokens.size(), 4u);
    EXPECT_EQ(first.tokens, direct_drafts(*head, seq->tokens(), next, 40 - window + 1, 4));
    EXPECT_TRUE(first.probs.empty());  // greedy: point masses
    // After verified steps (drafts rejected and accepted, the head's rows caught up in pieces):
    // still the head's own proposal over the same rows. The drafter's rows started at
    // 40 - window + 1 and were never restarted.
    g.begin({.sampling = {.temperature = 0}, .max_tokens = 20, .max_draft = 3});
    std::vector<int32_t> out;
    while (!g.advance([&](int32_t id) { out.push_back(id); return true; })) eval(g.next(16));
    EXPECT_EQ(d.stats().restarts, 1);
    // The last emitted token is pending (not evaluated): it is the `next` of a proposal.
    const std::vector<int32_t> held = seq->tokens();
    const engine::Draft later = d.propose(held, out.back(), 3);
    ASSERT_EQ(later.tokens.size(), 3u);
    EXPECT_EQ(later.tokens, direct_drafts(*head, held, out.back(), 40 - window + 1, 3));
}

TEST_F(MtpDrafterTest, MarginCutsUnsureDraftsAndSampledDraftsCarryTheirDistribution) {
    auto head = deepseek4::MtpHead::open(*model_, support_);
    const std::vector<int32_t> prompt = test::random_token_ids(24, model_->config().n_vocab, 11);
    // A margin no random head reaches: nothing is drafted, the output is still the plain one.
    const model::SequenceOptions so{.ctx = 256, .qat = true, .rewind_slack = 32};
    {
        auto seq = model_->new_sequence(so);
        engine::Generator g(*seq, {.n_vocab = model_->config().n_vocab, .eos = -1, .hidden_size = model_->info().hidden_size});
        MtpDrafter d(*head, so, {.margin = 1e9f});
        g.set_drafter(&d);
        g.set_prompt(prompt);
        auto eval = [&](const engine::Generator::Rows& r) {
            const model::BatchItem it = r.item(seq.get());
            model_->eval(model::Batch(&it, 1));
            g.evaluated();
        };
        while (!g.ready()) eval(g.next(64));
        g.begin({.sampling = {.temperature = 0}, .max_tokens = 8, .max_draft = 4});
        std::vector<int32_t> out;
        while (!g.advance([&](int32_t id) { out.push_back(id); return true; })) eval(g.next(64));
        EXPECT_EQ(g.usage().drafted, 0);
        EXPECT_GT(d.stats().cut, 0);
        EXPECT_EQ(out, decode(prompt, 8, nullptr, 0, 64).out);
    }
    // At temperature > 0 the drafts are drawn from the head and come with q.
    {
        auto seq = model_->new_sequence(so);
        engine::Generator g(*seq, {.n_vocab = model_->config().n_vocab, .eos = -1, .hidden_size = model_->info().hidden_size});
        MtpDrafter d(*head, so, {});
        g.set_drafter(&d);
        g.set_prompt(prompt);
        while (!g.ready()) {
            const engine::Generator::Rows r = g.next(64);
            const model::BatchItem it = r.item(seq.get());
            model_->eval(model::Batch(&it, 1));
            g.evaluated();
        }
        d.begin({.temperature = 1.0f, .min_p = 0, .seed = 5});
        const engine::Draft dr = d.propose(seq->tokens(), 1, 3);
        ASSERT_EQ(dr.tokens.size(), 3u);
        ASSERT_EQ(dr.probs.size(), 3u * size_t(model_->config().n_vocab));
        for (size_t i = 0; i < 3; ++i) {
            double sum = 0;
            for (int64_t v = 0; v < model_->config().n_vocab; ++v) sum += dr.probs[i * size_t(model_->config().n_vocab) + size_t(v)];
            EXPECT_NEAR(sum, 1.0, 1e-4);
            EXPECT_GT(dr.probs[i * size_t(model_->config().n_vocab) + size_t(dr.tokens[i])], 0.0f);
        }
    }
}

// The drafter's state is saved with the sequence (Generator::save_state: the state's drafter
// section) and restored on load: the restored drafter proposes exactly what the uninterrupted
// one does, and the decoding that follows (output, drafted and accepted counts) is the same.
// Without the section a loaded drafter holds nothing and proposes nothing until it has rows
// again.
TEST_F(MtpDrafterTest, DrafterStateIsSavedAndRestoredWithTheSequence) {
    auto head = deepseek4::MtpHead::open(*model_, support_);
    const model::SequenceOptions so{.ctx = 256, .qat = true, .rewind_slack = 32};
    struct Side {
        std::unique_ptr<model::Sequence> seq;
        std::unique_ptr<engine::Generator> g;
        std::unique_ptr<MtpDrafter> d;
    };
    auto side = [&] {
        Side s;
        s.seq = model_->new_sequence(so);
        s.g = std::make_unique<engine::Generator>(
            *s.seq, engine::GeneratorConfig{.n_vocab = model_->config().n_vocab, .eos = -1,
                                            .hidden_size = model_->info().hidden_size});
        s.d = std::make_unique<MtpDrafter>(*head, so, MtpDrafterOptions{.margin = 0});
        s.g->set_drafter(s.d.get());
        return s;
    };
    auto generate = [&](Side& s, const std::vector<int32_t>& prompt, int64_t n) {
        s.g->set_prompt(prompt);
        auto eval = [&](const engine::Generator::Rows& r) {
            const model::BatchItem it = r.item(s.seq.get());
            model_->eval(model::Batch(&it, 1));
            s.g->evaluated();
        };
        while (!s.g->ready()) eval(s.g->next(16));
        s.g->begin({.sampling = {.temperature = 0}, .max_tokens = n, .max_draft = 3});
        std::vector<int32_t> out;
        while (!s.g->advance([&](int32_t id) { out.push_back(id); return true; })) eval(s.g->next(16));
        return out;
    };
    Side a = side();
    const std::vector<int32_t> prompt = test::random_token_ids(40, model_->config().n_vocab, 21);
    const std::vector<int32_t> first = generate(a, prompt, 12);
    const std::vector<uint8_t> state = a.g->save_state(*model_);
    const auto section = model::drafter_section(state);
    ASSERT_TRUE(section);
    EXPECT_EQ(section->kind, "mtp");

    Side b = side();
    ASSERT_TRUE(b.g->load_state(*model_, state));
    EXPECT_EQ(b.seq->tokens(), a.seq->tokens());
    const int32_t next = first.back();  // emitted, not evaluated: the next proposal's `next`
    const engine::Draft da = a.d->propose(a.seq->tokens(), next, 3), db = b.d->propose(b.seq->tokens(), next, 3);
    ASSERT_FALSE(da.tokens.empty());
    EXPECT_EQ(db.tokens, da.tokens);

    // A state without the section (saved by the model alone): the drafter starts again.
    Side c = side();
    EXPECT_FALSE(c.g->load_state(*model_, model_->save_state(*a.seq)));
    EXPECT_TRUE(c.d->propose(c.seq->tokens(), next, 3).tokens.empty());

    // The next turn: the same output and the same drafts accepted, loaded or not.
    std::vector<int32_t> turn = a.seq->tokens();
    turn.push_back(next);
    const std::vector<int32_t> more = test::random_token_ids(3, model_->config().n_vocab, 22);
    turn.insert(turn.end(), more.begin(), more.end());
    const std::vector<int32_t> ra = generate(a, turn, 20), rb = generate(b, turn, 20);
    EXPECT_EQ(rb, ra);
    EXPECT_GT(a.g->usage().drafted, 0);
    EXPECT_EQ(b.g->usage().drafted, a.g->usage().drafted);
    EXPECT_EQ(b.g->usage().accepted, a.g->usage().accepted);
}

}  // namespace
}  // namespace ds4::speculative
