// Sequence state as bytes (model/state_file.h, docs/STATE_FORMAT.md): continuing after a save
// and a load equals never having saved, at positions inside and at the edges of the raw window
// and of the compressors' windows, for whole models and for layer ranges; corrupted,
// truncated or foreign states are rejected with a clear error and leave the target unchanged.
#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "model/deepseek4/model.h"
#include "model/session.h"
#include "model/state_file.h"
#include "tokenizer/tokenizer.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

std::string generate(const test::TempDir& dir, const std::string& name, const std::vector<std::string>& args) {
    return test::generate_model(dir, name, args);
}

class State : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        path_ = generate(*dir_, "tiny.gguf", {"--preset", "tiny", "--seed", "3"});
    }
    static void TearDownTestSuite() { delete dir_; }
    static test::TempDir* dir_;
    static std::string path_;
};
test::TempDir* State::dir_ = nullptr;
std::string State::path_;

// Logits of ids[from..] after the first `from` were evaluated into `seq`, in chunks of 16.
std::vector<float> continue_from(Model& m, model::Sequence& seq, const std::vector<int32_t>& ids, int64_t from) {
    const int64_t V = m.config().n_vocab;
    std::vector<float> out((ids.size() - size_t(from)) * size_t(V));
    for (int64_t at = from; at < int64_t(ids.size());) {
        const int64_t n = std::min<int64_t>(16, int64_t(ids.size()) - at);
        const model::BatchItem it{&seq, {ids.data() + at, size_t(n)}, model::Logits::All, out.data() + (at - from) * V};
        m.eval(model::Batch(&it, 1));
        at += n;
    }
    return out;
}

void feed(Model& m, model::Sequence& seq, const std::vector<int32_t>& ids, int64_t n) {
    for (int64_t at = 0; at < n;) {
        const int64_t k = std::min<int64_t>(32, n - at);
        const model::BatchItem it{&seq, {ids.data() + at, size_t(k)}};
        m.eval(model::Batch(&it, 1));
        at += k;
    }
}

TEST_F(State, ContinuingAfterALoadEqualsNeverSaving) {
    auto m = Model::load(path_, {.threads = 2});
    const int64_t V = m->config().n_vocab;
    const auto ids = test::random_token_ids(300, V, 4);
    // 0: empty; 1, 15, 16, 17: around the raw window of 16; 130: mid ratio-4 window after a
    // ratio-128 row; 255, 256: around the second ratio-128 row; the indexer chooses from 20 on.
    for (int64_t n : {0, 1, 15, 16, 17, 130, 255, 256}) {
        SCOPED_TRACE("saved at " + std::to_string(n));
        auto seq = m->new_sequence({.ctx = 512});
        feed(*m, *seq, ids, n);
        std::vector<float> logits(static_cast<size_t>(V), 0.5f);
        const std::vector<uint8_t> bytes = m->save_state(*seq, logits);
        // Into a sequence with another context and rewind slack: the state is positional.
        auto loaded = m->new_sequence({.ctx = 320, .rewind_slack = 3});
        std::vector<float> got_logits;
        m->load_state(bytes, *loaded, &got_logits);
        EXPECT_EQ(loaded->tokens(), seq->tokens());
        EXPECT_EQ(got_logits, logits);
        EXPECT_EQ(loaded->state_bytes_used(), seq->state_bytes_used());
        const auto a = continue_from(*m, *seq, ids, n);
        const auto b = continue_from(*m, *loaded, ids, n);
        ASSERT_EQ(a.size(), b.size());
        EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
    }
}

TEST_F(State, RewindAfterALoadStopsAtWhatWasSaved) {
    auto m = Model::load(path_, {.threads = 2});
    const auto ids = test::random_token_ids(100, m->config().n_vocab, 5);
    auto seq = m->new_sequence({.ctx = 256});
    feed(*m, *seq, ids, 100);
    auto loaded = m->new_sequence({.ctx = 256});
    m->load_state(m->save_state(*seq), *loaded);
    EXPECT_TRUE(seq->can_rewind(90));
    EXPECT_FALSE(loaded->can_rewind(90));  // the raw rows before the last window were not saved
    EXPECT_TRUE(loaded->can_rewind(100));
    EXPECT_TRUE(loaded->can_rewind(0));
    // A session falls back to evaluating the prefix again, and matches a fresh run.
    model::Session s(*m, {.ctx = 256});
    m->load_state(m->save_state(*seq), s.sequence());
    s.truncate(90);
    std::vector<float> a, b;
    s.eval({ids[90]}, &a);
    model::Session fresh(*m, {.ctx = 256});
    fresh.eval(std::vector<int32_t>(ids.begin(), ids.begin() + 91), &b);
    EXPECT_EQ(a, b);
}

TEST_F(State, LayerRangeStatesLoadIntoTheirRange) {
    auto whole = Model::load(path_, {.threads = 2});
    auto first = Model::load(path_, {.threads = 2, .layers = "0:2"});
    auto second = Model::load(path_, {.threads = 2, .layers = "3:output"});
    const int64_t V = whole->config().n_vocab, H = first->info().hidden_size;
    const auto ids = test::random_token_ids(150, V, 6);
    auto s1 = first->new_sequence({.ctx = 256});
    auto s2 = second->new_sequence({.ctx = 256});
    auto step = [&](model::Sequence& a, model::Sequence& b, int64_t at, int64_t n, float* logits) {
        std::vector<float> h(static_cast<size_t>(n * H));
        const model::BatchItem ia{&a, {ids.data() + at, size_t(n)}};
        const model::BatchItem ib{&b, {ids.data() + at, size_t(n)}, model::Logits::All, logits};
        first->embed(model::Batch(&ia, 1), h.data());
        first->eval_layers(model::Batch(&ia, 1), h.data());
        second->eval_layers(model::Batch(&ib, 1), h.data());
        second->head(model::Batch(&ib, 1), h.data());
    };
    std::vector<float> sink(static_cast<size_t>(100 * V));
    step(*s1, *s2, 0, 100, sink.data());
    const auto b1 = first->save_state(*s1), b2 = second->save_state(*s2);
    EXPECT_THROW(second->load_state(b1, *second->new_sequence({.ctx = 256})), Error);
    EXPECT_THROW(whole->load_state(b1, *whole->new_sequence({.ctx = 256})), Error);
    auto l1 = first->new_sequence({.ctx = 256});
    auto l2 = second->new_sequence({.ctx = 256});
    first->load_state(b1, *l1);
    second->load_state(b2, *l2);
    std::vector<float> a(static_cast<size_t>(50 * V)), b(static_cast<size_t>(50 * V));
    step(*s1, *s2, 100, 50, a.data());
    step(*l1, *l2, 100, 50, b.data());
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
}

// Range states merged in layer order are the whole model's state byte for byte; cut back, each
// range's part is that range's state; parts that do not fit together are refused.
TEST_F(State, RangeStatesMergeIntoTheWholeStateAndCutBack) {
    auto whole = Model::load(path_, {.threads = 2});
    auto first = Model::load(path_, {.threads = 2, .layers = "0:2"});
    auto second = Model::load(path_, {.threads = 2, .layers = "3:output"});
    const int64_t V = whole->config().n_vocab, H = first->info().hidden_size;
    const auto ids = test::random_token_ids(60, V, 8);
    auto sw = whole->new_sequence({.ctx = 128});
    auto s1 = first->new_sequence({.ctx = 128});
    auto s2 = second->new_sequence({.ctx = 128});
    std::vector<float> logits(static_cast<size_t>(V)), h(static_cast<size_t>(60 * H));
    const model::BatchItem iw{sw.get(), ids, model::Logits::Last, logits.data()};
    whole->eval(model::Batch(&iw, 1));
    const model::BatchItem i1{s1.get(), ids}, i2{s2.get(), ids};
    first->embed(model::Batch(&i1, 1), h.data());
    first->eval_layers(model::Batch(&i1, 1), h.data());
    second->eval_layers(model::Batch(&i2, 1), h.data());
    const auto ref = whole->save_state(*sw, logits);
    const auto b1 = first->save_state(*s1), b2 = second->save_state(*s2);
    const auto all = model::LayerRange::all(whole->info().n_layer);
    EXPECT_TRUE(model::merge_range_states({b1, b2}, all, logits) == ref);
    EXPECT_TRUE(model::cut_range_state(ref, first->info().range) == b1);
    EXPECT_TRUE(model::cut_range_state(ref, second->info().range) == b2);
    auto expect_refused = [&](const std::vector<std::span<const uint8_t>>& parts, const char* what) {
        try {
            model::merge_range_states(parts, all, {});
            ADD_FAILURE() << what << ": merged";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    expect_refused({b2, b1}, "holds layers 3:output, expected layer 0 next");
    expect_refused({b1}, "the parts end at layer 2");
    auto shorter = second->new_sequence({.ctx = 128});
    const model::BatchItem i3{shorter.get(), {ids.data(), 59}};
    second->eval_layers(model::Batch(&i3, 1), h.data());
    const auto b3 = second->save_state(*shorter);
    expect_refused({b1, b3}, "holds other tokens");
    EXPECT_THROW(model::cut_range_state(b1, second->info().range), Error);
}

TEST_F(State, BadStatesAreRejectedAndLeaveTheSequenceAlone) {
    auto m = Model::load(path_, {.threads = 2});
    const auto ids = test::random_token_ids(40, m->config().n_vocab, 7);
    auto seq = m->new_sequence({.ctx = 64});
    feed(*m, *seq, ids, 40);
    const std::vector<uint8_t> good = m->save_state(*seq);
    auto target = m->new_sequence({.ctx = 64});
    feed(*m, *target, ids, 10);
    auto expect_rejected = [&](const std::vector<uint8_t>& bytes, const char* what) {
        try {
            m->load_state(bytes, *target);
            ADD_FAILURE() << what << ": accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
        EXPECT_EQ(target->pos(), 10);
    };
    // Every single flipped bit and every truncation is caught by the checksum (sampled).
    for (size_t i = 0; i < good.size(); i += 97) {
        std::vector<uint8_t> bad = good;
        bad[i] ^= 0x10;
        expect_rejected(bad, i < 8 ? "not a ds4 state" : "checksum");
    }
    for (size_t n : {size_t(0), size_t(7), size_t(20), good.size() / 2, good.size() - 1})
        expect_rejected(std::vector<uint8_t>(good.begin(), good.begin() + n), n < 16 ? "not a ds4 state" : "checksum");
    // Too long for the target's context.
    auto small = m->new_sequence({.ctx = 32});
    EXPECT_THROW(m->load_state(good, *small), Error);
    EXPECT_EQ(small->pos(), 0);
    // A state saved with QAT on does not continue a sequence with it off.
    auto no_qat = m->new_sequence({.ctx = 64, .qat = false});
    EXPECT_THROW(m->load_state(good, *no_qat), Error);
    // Another model of the same layout (other weights), and another shape.
    const std::string other_path = generate(*dir_, "other.gguf", {"--preset", "tiny", "--seed", "4"});
    auto other = Model::load(other_path);
    try {
        other->load_state(good, *other->new_sequence({.ctx = 64}));
        ADD_FAILURE() << "a state of other weights loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("other weights"), std::string::npos) << e.what();
    }
    const std::string wide_path = generate(*dir_, "wide.gguf", {"--preset", "tiny", "--embd", "512"});
    auto wide = Model::load(wide_path);
    try {
        wide->load_state(good, *wide->new_sequence({.ctx = 64}));
        ADD_FAILURE() << "a state of another model loaded";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("another model"), std::string::npos) << e.what();
    }
}

// The drafter section (flag bit 1, docs/STATE_FORMAT.md): a state with one loads into the model
// exactly as without (the model skips it), reads back as written, and a section that does not
// parse is refused with the reason; a state gets at most one, of a kind of 1 to 15 bytes.
TEST_F(State, ADrafterSectionRidesAlongAndIsChecked) {
    auto m = Model::load(path_, {.threads = 2});
    const auto ids = test::random_token_ids(40, m->config().n_vocab, 8);
    auto seq = m->new_sequence({.ctx = 64});
    feed(*m, *seq, ids, 30);
    const std::vector<uint8_t> plain = m->save_state(*seq);
    EXPECT_FALSE(model::drafter_section(plain));
    const model::DrafterSection sec{"mtp", {1, 2, 3, 4, 5}};
    const std::vector<uint8_t> with = model::with_drafter_section(plain, sec);
    EXPECT_EQ(with.size(), plain.size() + 4 + 16 + 8 + 5);
    const auto back = model::drafter_section(with);
    ASSERT_TRUE(back);
    EXPECT_EQ(back->kind, "mtp");
    EXPECT_EQ(back->bytes, sec.bytes);
    auto loaded = m->new_sequence({.ctx = 64});
    m->load_state(with, *loaded);
    EXPECT_EQ(continue_from(*m, *loaded, ids, 30), continue_from(*m, *seq, ids, 30));
    EXPECT_THROW(model::with_drafter_section(with, sec), Error);
    EXPECT_THROW(model::with_drafter_section(plain, {"", {}}), Error);
    EXPECT_THROW(model::with_drafter_section(plain, {std::string(16, 'k'), {}}), Error);
    // Malformed sections (with a correct checksum): version, kind, length.
    auto rechecked = [](std::vector<uint8_t> b) {
        const uint64_t sum = XXH3_64bits(b.data(), b.size() - 8);
        std::memcpy(b.data() + b.size() - 8, &sum, 8);
        return b;
    };
    const size_t at = plain.size() - 8;  // the section starts where the checksum was
    auto expect_refused = [&](std::vector<uint8_t> b, const char* what) {
        try {
            auto t = m->new_sequence({.ctx = 64});
            m->load_state(rechecked(std::move(b)), *t);
            ADD_FAILURE() << what << ": accepted";
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    std::vector<uint8_t> bad = with;
    bad[at] = 2;
    expect_refused(bad, "drafter section version 2, this build reads version 1");
    bad = with;
    bad[at + 4] = 0;
    expect_refused(bad, "drafter kind empty or not terminated");
    bad = with;
    bad[at + 4 + 16] = 6;  // 6 bytes declared, 5 there
    expect_refused(bad, "drafter section of 6 bytes, 5 left");
    bad = with;
    bad[at + 4 + 16] = 4;  // one byte left over
    expect_refused(bad, "1 bytes after the last section");
    bad = plain;
    bad[12] |= 2;  // the flag without a section
    expect_refused(bad, "truncated: drafter section version");
}

TEST_F(State, EngineResumesFromASavedStateWithoutEvaluating) {
    // The engine saves its next-token logits with the state: after a load, generate() samples
    // at once and continues exactly as the original would have.
    const std::string path = generate(*dir_, "vocab.gguf", {"--preset", "tiny", "--real-vocab"});
    auto m = Model::load(path, {.threads = 2});
    auto tok = tokenizer::Tokenizer::from_gguf(m->file());
    const auto prompt = tok->encode("The state of a conversation, saved and loaded.");
    engine::GenerateOptions g;
    g.sampling.temperature = 0;
    g.max_tokens = 12;
    std::vector<int32_t> a, b;
    engine::Engine e1(*m, *tok, {.ctx = 128});
    e1.sync(prompt);
    const std::vector<uint8_t> bytes = e1.save_state();
    e1.generate(g, [&](int32_t id) { a.push_back(id); return true; });
    engine::Engine e2(*m, *tok, {.ctx = 128});
    e2.load_state(bytes);
    EXPECT_EQ(e2.tokens(), prompt);
    const auto r = e2.sync(prompt);
    EXPECT_EQ(r.evaluated, 0);
    e2.generate(g, [&](int32_t id) { b.push_back(id); return true; });
    EXPECT_EQ(a, b);
    EXPECT_FALSE(a.empty());
}

}  // namespace
}  // namespace ds4::deepseek4
