// engine::Generator driven over a fake model: a sequence whose next-token logits are a fixed
// function of its history. Drafts are verified several tokens per step and rolled back to the
// accepted prefix; the output, the held history and the stop reasons are those of a run without
// drafts, for every drafter (right, wrong, partly right) and every stop inside a verified run.
#include <gtest/gtest.h>

// GCC 12 at -O3 reports the empty std::function GenerateOptions::greedy of a designated
// initializer as "maybe uninitialized" when it is destroyed (a known false positive).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include <cmath>
#include <functional>
#include <memory>
#include <optional>

#include "common/error.h"
#include "engine/generator.h"

namespace ds4::engine {
namespace {

constexpr int64_t kVocab = 61;
constexpr int32_t kEos = 0;

uint64_t mix(uint64_t h) {
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

uint64_t history_hash(std::span<const int32_t> h) {
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (int32_t t : h) x = mix(x ^ uint64_t(t + 1));
    return x;
}

// The fake model's next-token logits after `history`: smooth, history-dependent values, so
// greedy decoding and sampling at temperature 1 both produce varied continuations. EOS gets a
// large logit only where `eos_after` says so.
void fake_logits(std::span<const int32_t> history, float* out, int64_t eos_after) {
    const uint64_t h = history_hash(history);
    for (int64_t i = 0; i < kVocab; ++i) out[i] = float(mix(h + uint64_t(i)) % 1000) / 250.0f;
    out[kEos] = int64_t(history.size()) == eos_after ? 100.0f : -100.0f;
}

class FakeSequence : public model::Sequence {
public:
    explicit FakeSequence(model::SequenceOptions opt) : Sequence(opt) {}
    bool can_rewind(int64_t n) const override { return n <= pos() && pos() - n <= opt_.rewind_slack; }
    void rewind(int64_t n) override {
        if (!can_rewind(n)) fail("fake: rewind to {} from {}", n, pos());
        ++rewinds;
        tokens_.resize(size_t(n));
    }
    void clear() override {
        ++clears;
        tokens_.clear();
    }
    int64_t state_bytes() const override { return 0; }
    int64_t state_bytes_used() const override { return 0; }
    std::unique_ptr<Sequence> clone() const override { return std::make_unique<FakeSequence>(*this); }
    void assign(const Sequence& other) override { *this = static_cast<const FakeSequence&>(other); }

    // The fake model's evaluation: appends the rows, writes the wanted logits.
    void eval(const Generator::Rows& rows, int64_t eos_after) {
        ASSERT_FALSE(rows.tokens.empty());
        ASSERT_LE(pos() + int64_t(rows.tokens.size()), opt_.ctx);
        for (size_t r = 0; r < rows.tokens.size(); ++r) {
            tokens_.push_back(rows.tokens[r]);
            const bool last = r + 1 == rows.tokens.size();
            if (rows.want == model::Logits::All)
                fake_logits(tokens_, rows.logits + r * kVocab, eos_after);
            else if (rows.want == model::Logits::Last && last)
                fake_logits(tokens_, rows.logits, eos_after);
        }
        ++evals;
    }

    int rewinds = 0, clears = 0, evals = 0;
};

// Proposes the true greedy continuation, except that proposal number `wrong_at` (counting
// from 0 within each proposal) is replaced by a wrong token, and at most `len` tokens.
class ScriptedDrafter : public Drafter {
public:
    ScriptedDrafter(int len, int wrong_at, int64_t eos_after) : len_(len), wrong_at_(wrong_at), eos_after_(eos_after) {}
    Draft propose(std::span<const int32_t> history, int32_t next, int max) override {
        ++calls;
        std::vector<int32_t> h(history.begin(), history.end());
        h.push_back(next);
        Draft d;
        std::vector<int32_t>& out = d.tokens;
        std::vector<float> l(kVocab);
        for (int i = 0; i < std::min(len_, max); ++i) {
            fake_logits(h, l.data(), eos_after_);
            int32_t best = 0;
            for (int32_t v = 1; v < kVocab; ++v)
                if (l[size_t(v)] > l[size_t(best)]) best = v;
            if (i == wrong_at_) best = (best + 1) % int32_t(kVocab);
            out.push_back(best);
            h.push_back(best);
        }
        return d;
    }
    int calls = 0;

private:
    int len_, wrong_at_;
    int64_t eos_after_;
};

struct Outcome {
    std::vector<int32_t> emitted;
    std::optional<StopReason> reason;
    std::vector<int32_t> held;  // the sequence's tokens at the end
    GeneratorUsage usage;
    int rewinds = 0, evals = 0;
};

struct RunOptions {
    GenerateOptions gen;
    Drafter* drafter = nullptr;
    int64_t ctx = 256;
    int64_t eos_after = -1;      // history length at which EOS becomes the certain next token
    int64_t stop_after = -1;     // on_token returns false for the n-th token (1-based)
    int64_t prefill_chunk = 5;
    std::vector<int32_t> stop_ids = {};  // GeneratorConfig::stop_ids
};

const std::vector<int32_t> kPrompt = {3, 14, 15, 9, 26, 5, 35, 8, 9, 7, 9, 32};

Outcome run(RunOptions o, const std::vector<int32_t>& prompt = kPrompt) {
    FakeSequence seq({.ctx = o.ctx, .qat = false, .rewind_slack = 32});
    Generator g(seq, {.n_vocab = kVocab, .eos = kEos, .stop_ids = o.stop_ids});
    g.set_drafter(o.drafter);
    Outcome r;
    EXPECT_EQ(g.set_prompt(prompt), 0);
    while (!g.ready()) seq.eval(g.next(o.prefill_chunk), o.eos_after), g.evaluated();
    EXPECT_EQ(seq.tokens(), prompt);
    g.begin(o.gen);
    for (int guard = 0; guard < 10000; ++guard) {
        r.reason = g.advance([&](int32_t id) {
            r.emitted.push_back(id);
            return o.stop_after < 0 || int64_t(r.emitted.size()) < o.stop_after;
        });
        if (r.reason) break;
        seq.eval(g.next(o.prefill_chunk), o.eos_after);
        g.evaluated();
    }
    r.held = seq.tokens();
    r.usage = g.usage();
    r.rewinds = seq.rewinds;
    r.evals = seq.evals;
    return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, std::span<const int32_t> b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

// What the sequence holds after a stop: the prompt and every emitted token but the last
// (which was reported, never evaluated), unless EOS ended it (every emitted token is held).
void expect_held(const Outcome& r) {
    std::vector<int32_t> want = kPrompt;
    const size_t n = r.emitted.size();
    const size_t held = r.reason == StopReason::Eos || r.reason == StopReason::Cancelled ? n : (n ? n - 1 : 0);
    want.insert(want.end(), r.emitted.begin(), r.emitted.begin() + long(held));
    EXPECT_EQ(r.held, want);
}

TEST(Generator, GreedyWithoutDraftsOneTokenPerStep) {
    const Outcome r = run({.gen = {.sampling = {.temperature = 0}, .max_tokens = 20}});
    EXPECT_EQ(r.reason, StopReason::Length);
    ASSERT_EQ(r.emitted.size(), 20u);
    EXPECT_EQ(r.usage.steps, 19);
    EXPECT_EQ(r.usage.drafted, 0);
    EXPECT_EQ(r.rewinds, 0);
    expect_held(r);
    // Each emitted token is the argmax after exactly the history before it.
    std::vector<int32_t> h = kPrompt;
    std::vector<float> l(kVocab);
    for (int32_t id : r.emitted) {
        fake_logits(h, l.data(), -1);
        EXPECT_EQ(id, int32_t(std::max_element(l.begin(), l.end()) - l.begin()));
        h.push_back(id);
    }
}

// A chat format's stop ids (GLM: the markers that open the next turn) end a reply as EOS does:
// not emitted, the reason Eos; with ban_eos they are never sampled.
TEST(Generator, StopIdsEndTheReplyLikeEos) {
    const GenerateOptions greedy{.sampling = {.temperature = 0}, .max_tokens = 20};
    const Outcome plain = run({.gen = greedy});
    ASSERT_EQ(plain.emitted.size(), 20u);
    const int32_t stop = plain.emitted[6];
    const size_t first = size_t(std::find(plain.emitted.begin(), plain.emitted.end(), stop) - plain.emitted.begin());
    const Outcome stopped = run({.gen = greedy, .stop_ids = {stop}});
    EXPECT_EQ(stopped.reason, StopReason::Eos);
    EXPECT_EQ(stopped.emitted, std::vector<int32_t>(plain.emitted.begin(), plain.emitted.begin() + long(first)));
    GenerateOptions banned = greedy;
    banned.ban_eos = true;
    const Outcome never = run({.gen = banned, .stop_ids = {stop}});
    EXPECT_EQ(never.reason, StopReason::Length);
    EXPECT_EQ(std::count(never.emitted.begin(), never.emitted.end(), stop), 0);
    EXPECT_EQ(never.emitted.size(), 20u);
    // Speculative runs stop there too.
    ScriptedDrafter right(3, -1, -1);
    const Outcome drafted = run({.gen = {.sampling = {.temperature = 0}, .max_tokens = 20, .max_draft = 3},
                                 .drafter = &right, .stop_ids = {stop}});
    EXPECT_EQ(drafted.emitted, stopped.emitted);
    EXPECT_EQ(drafted.reason, StopReason::Eos);
}

TEST(Generator, RightDraftsAreAcceptedSeveralTokensPerStep) {
    const Outcome plain = run({.gen = {.sampling = {.temperature = 0}, .max_tokens = 40}});
    ScriptedDrafter d(4, -1, -1);
    const Outcome spec = run({.gen = {.sampling = {.temperature = 0}, .max_tokens = 40, .max_draft = 4}, .drafter = &d});
    EXPECT_EQ(spec.emitted, plain.emitted);
    EXPECT_EQ(spec.reason, StopReason::Length);
    EXPECT_EQ(spec.usage.accepted, spec.usage.drafted);
    EXPECT_GT(spec.usage.accepted, 20);
    EXPECT_LE(spec.usage.steps, 10);  // 5 tokens per step
    EXPECT_EQ(spec.rewinds, 0);
    expect_held(spec);
}

TEST(Generator, WrongDraftsAreRolledBackAndChangeNothing) {
    const Outcome plain = run({.gen = {.sampling = {.temperature = 0}, .max_tokens = 40}});
    for (int wrong_at : {0, 1, 2, 5}) {
        SCOPED_TRACE(wrong_at);
        ScriptedDrafter d(6, wrong_at, -1);
        const Outcome spec = run({.gen = {.sampling = {.temperature = 0}, .max_tokens = 40, .max_draft = 6}, .drafter = &d});
        EXPECT_EQ(spec.emitted, plain.emitted);
        EXPECT_EQ(spec.reason, StopReason::Length);
        EXPECT_GT(spec.rewinds, 0);
        EXPECT_LT(spec.usage.accepted, spec.usage.drafted);
        // Each step accepts exactly the drafts before the wrong one (fewer in the last steps,
        // where the token limit leaves room for fewer drafts).
        EXPECT_LE(spec.usage.accepted, int64_t(wrong_at) * spec.usage.steps);
        EXPECT_GE(spec.usage.accepted, int64_t(wrong_at) * (spec.usage.steps - 2));
        expect_held(spec);
    }
}

TEST(Generator, SamplingWithDraftsDrawsTheSameTokensAsWithout) {
    const GenerateOptions base{.sampling = {.temperature = 1.0f, .min_p = 0, .seed = 42}, .max_tokens = 60};
    const Outcome plain = run({.gen = base});
    ScriptedDrafter d(3, 2, -1);
    GenerateOptions with = base;
    with.max_draft = 3;
    const Outcome spec = run({.gen = with, .drafter = &d});
    EXPECT_EQ(spec.emitted, plain.emitted);
    EXPECT_GT(spec.usage.drafted, 0);
    expect_held(spec);
}

TEST(Generator, StopsInsideAVerifiedRunKeepOnlyTheAcceptedHistory) {
    ScriptedDrafter d(8, -1, -1);
    const GenerateOptions greedy{.sampling = {.temperature = 0}, .max_draft = 8};
    // The token limit in the middle of a step's drafts.
    for (int64_t max : {1, 2, 3, 7, 11}) {
        SCOPED_TRACE(max);
        GenerateOptions o = greedy;
        o.max_tokens = max;
        const Outcome r = run({.gen = o, .drafter = &d});
        EXPECT_EQ(r.reason, StopReason::Length);
        EXPECT_EQ(int64_t(r.emitted.size()), max);
        expect_held(r);
    }
    // The caller's stop at its 4th token (inside the first step's drafts).
    const Outcome caller = run({.gen = greedy, .drafter = &d, .stop_after = 4});
    EXPECT_EQ(caller.reason, StopReason::Caller);
    EXPECT_EQ(caller.emitted.size(), 4u);
    expect_held(caller);
    // EOS: certain once the history is 12 + 6 tokens long, proposed past by the drafter.
    ScriptedDrafter past_eos(8, -1, -1);
    const Outcome eos = run({.gen = greedy, .drafter = &past_eos, .eos_after = int64_t(kPrompt.size()) + 6});
    EXPECT_EQ(eos.reason, StopReason::Eos);
    EXPECT_EQ(eos.emitted.size(), 6u);
    EXPECT_GT(eos.rewinds, 0);
    expect_held(eos);
    // A full context: rows never pass it, and the stop comes where it comes without drafts.
    const Outcome plain_full = run({.gen = {.sampling = {.temperature = 0}}, .ctx = 30});
    const Outcome spec_full = run({.gen = greedy, .drafter = &d, .ctx = 30});
    EXPECT_EQ(plain_full.reason, StopReason::ContextFull);
    EXPECT_EQ(spec_full.reason, StopReason::ContextFull);
    EXPECT_EQ(spec_full.emitted, plain_full.emitted);
    EXPECT_EQ(spec_full.held, plain_full.held);
}

TEST(Generator, CancelBetweenStepsKeepsEveryEmittedToken) {
    std::atomic<bool> cancel = false;
    FakeSequence seq({.ctx = 256, .qat = false, .rewind_slack = 32});
    Generator g(seq, {.n_vocab = kVocab, .eos = kEos});
    g.set_prompt(kPrompt);
    while (!g.ready()) seq.eval(g.next(64), -1), g.evaluated();
    ScriptedDrafter d(3, 1, -1);
    g.set_drafter(&d);
    g.begin({.sampling = {.temperature = 0}, .cancel = &cancel, .max_draft = 3});
    std::vector<int32_t> emitted;
    auto on = [&](int32_t id) { emitted.push_back(id); return true; };
    for (int i = 0; i < 3; ++i) {
        ASSERT_FALSE(g.advance(on));
        seq.eval(g.next(64), -1);
        g.evaluated();
    }
    cancel = true;
    EXPECT_EQ(g.advance(on), StopReason::Cancelled);
    // The pending token of the last step was evaluated and accepted: all emitted are held.
    EXPECT_EQ(seq.tokens(), concat(kPrompt, emitted));
}

TEST(Generator, SetPromptReusesThePrefixAndRewindsOrClears) {
    FakeSequence seq({.ctx = 256, .qat = false, .rewind_slack = 8});
    Generator g(seq, {.n_vocab = kVocab, .eos = kEos});
    auto fill = [&] { while (!g.ready()) seq.eval(g.next(4), -1), g.evaluated(); };
    std::vector<int32_t> a(30);
    for (size_t i = 0; i < a.size(); ++i) a[i] = int32_t(1 + i % 50);
    EXPECT_EQ(g.set_prompt(a), 0);
    fill();
    EXPECT_EQ(seq.evals, 8);  // ceil(30 / 4)
    // The same prompt with its logits ready: nothing to evaluate.
    EXPECT_EQ(g.set_prompt(a), 30);
    EXPECT_TRUE(g.ready());
    // A continuation: only the suffix.
    const std::vector<int32_t> b = concat(a, std::vector<int32_t>{7, 8, 9});
    EXPECT_EQ(g.set_prompt(b), 30);
    fill();
    EXPECT_EQ(seq.tokens(), b);
    // A prefix of what is held: its last position is evaluated again for its logits.
    EXPECT_EQ(g.set_prompt(a), 29);
    EXPECT_EQ(seq.rewinds, 1);
    fill();
    // Diverging 20 positions back, beyond the slack of 8: cleared and evaluated from 0.
    std::vector<int32_t> c(a.begin(), a.begin() + 10);
    c.push_back(60);
    EXPECT_EQ(g.set_prompt(c), 0);
    EXPECT_EQ(seq.clears, 1);
    fill();
    EXPECT_EQ(seq.tokens(), c);
    // The ready logits follow the held history.
    std::vector<float> want(kVocab);
    fake_logits(c, want.data(), -1);
    const auto got = g.ready_logits();
    EXPECT_EQ(std::vector<float>(got.begin(), got.end()), want);
}

TEST(Generator, PromptPiecesEndAtTheLimitWithLogits) {
    FakeSequence seq({.ctx = 256, .qat = false, .rewind_slack = 8});
    Generator g(seq, {.n_vocab = kVocab, .eos = kEos});
    std::vector<int32_t> p(20, 4);
    g.set_prompt(p);
    auto r = g.next(8, 6);
    EXPECT_EQ(r.tokens.size(), 6u);
    EXPECT_EQ(r.want, model::Logits::Last);  // a checkpoint at 6 wants them
    seq.eval(r, -1);
    g.evaluated();
    EXPECT_FALSE(g.ready());  // the prompt is not all held
    EXPECT_FALSE(g.ready_logits().empty());
    r = g.next(8, 100);
    EXPECT_EQ(r.tokens.size(), 8u);
    EXPECT_EQ(r.want, model::Logits::None);
    seq.eval(r, -1);
    g.evaluated();
    r = g.next(8);
    EXPECT_EQ(r.tokens.size(), 6u);
    EXPECT_EQ(r.want, model::Logits::Last);
    seq.eval(r, -1);
    g.evaluated();
    EXPECT_TRUE(g.ready());
    EXPECT_TRUE(g.next(8).tokens.empty());
}

TEST(Generator, MisuseIsAnError) {
    FakeSequence seq({.ctx = 16, .qat = false, .rewind_slack = 8});
    Generator g(seq, {.n_vocab = kVocab, .eos = kEos});
    EXPECT_THROW(g.set_prompt({}), Error);
    EXPECT_THROW(g.set_prompt(std::vector<int32_t>(16, 1)), Error);  // no room for a reply
    EXPECT_THROW(g.set_prompt({1, int32_t(kVocab)}), Error);
    EXPECT_THROW(g.advance([](int32_t) { return true; }), Error);  // no begin()
    g.set_prompt({1, 2});
    g.begin({});
    EXPECT_THROW(g.advance([](int32_t) { return true; }), Error);  // nothing evaluated
    g.next(4);
    EXPECT_THROW(g.next(4), Error);  // rows in flight
}

}  // namespace
}  // namespace ds4::engine

namespace ds4::engine {
namespace {

// Records what the generator commits, and checks each row's hidden state: the fake model's
// hidden state of a row is {position, token}.
class RecordingDrafter : public ScriptedDrafter {
public:
    RecordingDrafter(int64_t tail) : ScriptedDrafter(3, 1, -1), tail_(tail) {}
    DraftNeeds needs() const override { return {.hidden = true, .capture = {}, .tail = tail_}; }
    void commit(int64_t pos, std::span<const int32_t> tokens, const float* hidden, const float*) override {
        ASSERT_NE(hidden, nullptr);
        ++commits;
        if (first < 0) first = pos;
        ASSERT_GE(pos, first);
        ASSERT_LE(pos, first + int64_t(view.size()));  // no gap once started
        view.resize(size_t(pos - first));
        for (size_t i = 0; i < tokens.size(); ++i) {
            EXPECT_EQ(hidden[2 * i], float(pos + int64_t(i)));
            EXPECT_EQ(hidden[2 * i + 1], float(tokens[i]));
            view.push_back(tokens[i]);
        }
    }
    int64_t first = -1;
    std::vector<int32_t> view;  // the sequence's tokens from `first` on, as committed
    int commits = 0;

private:
    int64_t tail_;
};

void eval_with_hidden(FakeSequence& seq, const Generator::Rows& rows) {
    const int64_t p0 = seq.pos();
    if (rows.hidden_want == model::Logits::All)
        for (int64_t r = rows.hidden_from; r < int64_t(rows.tokens.size()); ++r) {
            rows.hidden[2 * (r - rows.hidden_from)] = float(p0 + r);
            rows.hidden[2 * (r - rows.hidden_from) + 1] = float(rows.tokens[size_t(r)]);
        }
    seq.eval(rows, -1);
}

TEST(Generator, TheDrafterIsToldEveryCommittedRowWithItsHiddenState) {
    for (int64_t tail : {0, 4}) {
        SCOPED_TRACE(tail);
        FakeSequence seq({.ctx = 256, .qat = false, .rewind_slack = 32});
        Generator g(seq, {.n_vocab = kVocab, .eos = kEos, .hidden_size = 2});
        RecordingDrafter d(tail);
        g.set_drafter(&d);
        g.set_prompt(kPrompt);
        while (!g.ready()) eval_with_hidden(seq, g.next(5)), g.evaluated();
        // The prompt's rows from its tail on (all of them without one), in pieces.
        const int64_t n = int64_t(kPrompt.size());
        EXPECT_EQ(d.first, tail ? n - tail : 0);
        g.begin({.sampling = {.temperature = 0}, .max_tokens = 30, .max_draft = 3});
        for (;;) {
            if (g.advance([](int32_t) { return true; })) break;
            eval_with_hidden(seq, g.next(5));
            g.evaluated();
        }
        EXPECT_LT(g.usage().accepted, g.usage().drafted);  // rejected drafts were never committed
        const std::vector<int32_t> held(seq.tokens().begin() + d.first, seq.tokens().end());
        EXPECT_EQ(d.view, held);
        // A new prompt that rewinds: the next commit starts before what the drafter holds.
        std::vector<int32_t> shorter(seq.tokens().begin(), seq.tokens().begin() + n + 3);
        shorter.push_back(1);
        g.set_prompt(shorter);
        while (!g.ready()) eval_with_hidden(seq, g.next(5)), g.evaluated();
        EXPECT_EQ(d.view, std::vector<int32_t>(seq.tokens().begin() + d.first, seq.tokens().end()));
    }
}

// Exact speculative sampling on a 4-token vocabulary: drafts drawn from a distribution q
// unlike the target's p are accepted with probability min(1, p/q) and otherwise replaced by a
// draw from the residual, so 3-token continuations keep the target's distribution exactly.
constexpr int kSmallVocab = 4;

void small_logits(std::span<const int32_t> history, float* out, uint64_t salt) {
    const uint64_t h = history_hash(history) ^ salt;
    for (int i = 0; i < kSmallVocab; ++i) out[i] = float(mix(h + uint64_t(i)) % 1000) / 400.0f;
}

std::vector<double> softmax(std::span<const float> l) {
    std::vector<double> p(l.size());
    double m = *std::max_element(l.begin(), l.end()), s = 0;
    for (size_t i = 0; i < l.size(); ++i) s += p[i] = std::exp(double(l[i]) - m);
    for (double& v : p) v /= s;
    return p;
}

class SmallSequence : public FakeSequence {
public:
    using FakeSequence::FakeSequence;
    void eval_small(const Generator::Rows& rows) {
        for (size_t r = 0; r < rows.tokens.size(); ++r) {
            tokens_.push_back(rows.tokens[r]);
            if (rows.want == model::Logits::All) small_logits(tokens_, rows.logits + r * kSmallVocab, 0);
            else if (rows.want == model::Logits::Last && r + 1 == rows.tokens.size())
                small_logits(tokens_, rows.logits, 0);
        }
    }
};

// Draws its drafts from q (the model's logits under another salt, i.e. a different
// distribution) and reports q.
class SamplingDrafter : public Drafter {
public:
    explicit SamplingDrafter(bool report_q) : report_q_(report_q) {}
    void begin(const sampling::SamplerParams& p) override { rng_ = sampling::Sampler({.temperature = 1, .min_p = 0, .seed = p.seed + 977}); }
    Draft propose(std::span<const int32_t> history, int32_t next, int max) override {
        std::vector<int32_t> h(history.begin(), history.end());
        h.push_back(next);
        Draft d;
        std::vector<float> l(kSmallVocab);
        for (int i = 0; i < max; ++i) {
            small_logits(h, l.data(), 0x5eed);
            const std::vector<double> q = softmax(l);
            const int32_t t = rng_.sample(l);
            d.tokens.push_back(t);
            for (double v : q) d.probs.push_back(float(v));
            h.push_back(t);
        }
        if (!report_q_) d.probs.clear();
        return d;
    }

private:
    bool report_q_;
    sampling::Sampler rng_;
};

TEST(Generator, ExactSpeculativeSamplingKeepsTheTargetDistribution) {
    const std::vector<int32_t> prompt = {1, 2, 3};
    // The exact probability of each 3-token continuation under the target.
    auto exact = [&](int seq_id) {
        std::vector<int32_t> h = prompt;
        std::vector<float> l(kSmallVocab);
        double p = 1;
        for (int k = 0, id = seq_id; k < 3; ++k, id /= kSmallVocab) {
            small_logits(h, l.data(), 0);
            p *= softmax(l)[size_t(id % kSmallVocab)];
            h.push_back(id % kSmallVocab);
        }
        return p;
    };
    constexpr int kRuns = 20000, kOutcomes = kSmallVocab * kSmallVocab * kSmallVocab;
    auto chi2 = [&](const std::vector<int>& count) {
        double x = 0;
        for (int s = 0; s < kOutcomes; ++s) {
            const double e = exact(s) * kRuns;
            x += (count[size_t(s)] - e) * (count[size_t(s)] - e) / e;
        }
        return x;
    };
    SamplingDrafter drafter(true);
    std::vector<int> count(kOutcomes, 0), drafted_count(kOutcomes, 0);
    int64_t drafted = 0, accepted = 0;
    for (int run = 0; run < kRuns; ++run) {
        SmallSequence seq({.ctx = 64, .qat = false, .rewind_slack = 8});
        Generator g(seq, {.n_vocab = kSmallVocab, .eos = -1});
        g.set_drafter(&drafter);
        g.set_prompt(prompt);
        while (!g.ready()) seq.eval_small(g.next(8)), g.evaluated();
        g.begin({.sampling = {.temperature = 1, .min_p = 0, .seed = uint64_t(run) + 1}, .max_tokens = 3, .max_draft = 2});
        std::vector<int32_t> out;
        while (!g.advance([&](int32_t id) { out.push_back(id); return true; })) {
            seq.eval_small(g.next(8));
            g.evaluated();
        }
        ASSERT_EQ(out.size(), 3u);
        count[size_t(out[0] + kSmallVocab * out[1] + kSmallVocab * kSmallVocab * out[2])]++;
        drafted += g.usage().drafted;
        accepted += g.usage().accepted;
    }
    // 63 degrees of freedom: the 0.1% critical value is about 103.4.
    EXPECT_LT(chi2(count), 103.4);
    EXPECT_GT(drafted, kRuns / 2);
    EXPECT_GT(accepted, drafted / 10);  // drafts are accepted ...
    EXPECT_LT(accepted, drafted);       // ... and rejected
    // The test can tell distributions apart: q's own 3-token law is far from p's.
    for (int run = 0; run < kRuns; ++run) {
        sampling::Sampler s({.temperature = 1, .min_p = 0, .seed = uint64_t(run) + 1});
        std::vector<int32_t> h = prompt;
        std::vector<float> l(kSmallVocab);
        int code = 0;
        for (int k = 0, mul = 1; k < 3; ++k, mul *= kSmallVocab) {
            small_logits(h, l.data(), 0x5eed);
            const int32_t t = s.sample(l);
            code += mul * t;
            h.push_back(t);
        }
        drafted_count[size_t(code)]++;
    }
    EXPECT_GT(chi2(drafted_count), 1000.0);
}

}  // namespace
}  // namespace ds4::engine

namespace ds4::engine {
namespace {

TEST(Generator, DraftsThatKeepMissingBackOffExponentially) {
    const GenerateOptions greedy{.sampling = {.temperature = 0}, .max_tokens = 60, .max_draft = 2};
    const Outcome plain = run({.gen = {.sampling = {.temperature = 0}, .max_tokens = 60}});
    ScriptedDrafter wrong(2, 0, -1);  // the first draft is always wrong
    const Outcome backed = run({.gen = greedy, .drafter = &wrong});
    EXPECT_EQ(backed.emitted, plain.emitted);
    // Drafting steps after waits of 1, 2, 4, 8, 16, 32 steps: 6 of them in about 59 steps, the
    // first with both drafts, the probes after it with one.
    EXPECT_EQ(backed.usage.accepted, 0);
    EXPECT_EQ(backed.usage.drafted, 2 + 5);
    EXPECT_EQ(backed.usage.backed_off, backed.usage.steps - 6);
    // Without the back-off every step drafts.
    GenerateOptions always = greedy;
    always.draft_backoff = false;
    const Outcome every = run({.gen = always, .drafter = &wrong});
    EXPECT_EQ(every.emitted, plain.emitted);
    EXPECT_EQ(every.usage.backed_off, 0);
    EXPECT_GE(every.usage.drafted, 2 * (every.usage.steps - 2));  // fewer at the token limit
    // A drafter that is right never backs off; one right at its first draft resets the wait.
    ScriptedDrafter right(2, -1, -1), half(2, 1, -1);
    EXPECT_EQ(run({.gen = greedy, .drafter = &right}).usage.backed_off, 0);
    EXPECT_EQ(run({.gen = greedy, .drafter = &half}).usage.backed_off, 0);
}

}  // namespace
}  // namespace ds4::engine
