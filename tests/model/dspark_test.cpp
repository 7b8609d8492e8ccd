// deepseek4::DsparkHead and speculative::DsparkDrafter on generated files (ds4-gguf-gen
// --dspark-out): the metadata and tensor checks name the key or tensor; the context rows do
// not depend on how the rows were committed (chunks, rewinds); and a generator that verifies
// DSpark drafts gives plain greedy decoding's output. The block's numbers are checked against
// the numpy reference in tests/oracle/dspark_oracle_test.cpp.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/error.h"
#include "engine/engine.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/deepseek4/dspark.h"
#include "model/deepseek4/model.h"
#include "model/state_file.h"
#include "sampling/sampler.h"
#include "speculative/dspark_drafter.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"
#include "tokenizer/tokenizer.h"

namespace ds4::deepseek4 {
namespace {

// A copy of a GGUF with metadata keys and tensors dropped, keys set, tensors declared with
// another shape (their bytes zeros).
struct Edit {
    std::set<std::string> drop_keys = {};
    std::set<std::string> drop_tensors = {};
    std::vector<std::pair<std::string, gguf::Value>> set = {};
    std::map<std::string, std::vector<int64_t>> reshape = {};
};

void rewrite(const std::string& src, const std::string& dst, const Edit& e) {
    auto f = gguf::File::open(src);
    gguf::Writer w(dst, f->alignment());
    for (const auto& [k, v] : f->metadata())
        if (k != "general.alignment" && !e.drop_keys.count(k)) w.set(k, v);
    for (const auto& [k, v] : e.set) w.set(k, v);
    std::map<std::string, uint64_t> sizes;
    for (const gguf::TensorInfo& t : f->tensors()) {
        if (e.drop_tensors.count(t.name)) continue;
        auto it = e.reshape.find(t.name);
        const std::vector<int64_t> ne =
            it != e.reshape.end() ? it->second : std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims);
        sizes[t.name] = w.add_tensor(t.name, t.type, ne);
    }
    w.begin_data();
    for (const gguf::TensorInfo& t : f->tensors()) {
        if (e.drop_tensors.count(t.name)) continue;
        if (e.reshape.count(t.name)) {
            const std::vector<uint8_t> zeros(sizes[t.name]);
            w.write_tensor(t.name, zeros);
        } else {
            w.write_tensor(t.name, std::span<const uint8_t>(f->data(t), t.n_bytes));
        }
    }
    w.finish();
}

class DsparkTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        dspark_ = new std::string(dir_->file("dspark.gguf"));
        const std::string trunk = test::generate_model(*dir_, "trunk.gguf", {"--seed", "11", "--dspark-out", *dspark_});
        model_ = Model::load(trunk, {.threads = 2}).release();
    }
    static void TearDownTestSuite() {
        delete model_;
        delete dspark_;
        delete dir_;
    }
    // The message of opening `e` applied to the generated file (empty: it opened).
    static std::string open_error(const Edit& e) {
        const std::string p = dir_->file("edited.gguf");
        rewrite(*dspark_, p, e);
        try {
            DsparkHead::open(*model_, p);
        } catch (const Error& err) {
            return err.what();
        }
        return "";
    }
    // The target layers' states of `tokens` evaluated from position 0: [T][n][hidden_size].
    static std::vector<float> captures(const DsparkHead& h, const std::vector<int32_t>& tokens) {
        auto seq = model_->new_sequence({.ctx = 256});
        const auto& t = h.info().target_layers;
        std::vector<float> cap(t.size() * tokens.size() * size_t(model_->info().hidden_size));
        const model::BatchItem it{.seq = seq.get(), .tokens = tokens, .capture = t, .captured = cap.data()};
        model_->eval(model::Batch(&it, 1));
        return cap;
    }
    // Rows [a, b) of a capture of n rows, as a capture of their own.
    static std::vector<float> rows(const std::vector<float>& cap, size_t T, int64_t n, int64_t a, int64_t b) {
        const size_t H = size_t(model_->info().hidden_size);
        std::vector<float> out;
        for (size_t j = 0; j < T; ++j)
            out.insert(out.end(), cap.begin() + long((j * size_t(n) + size_t(a)) * H),
                       cap.begin() + long((j * size_t(n) + size_t(b)) * H));
        return out;
    }

    static test::TempDir* dir_;
    static std::string* dspark_;
    static Model* model_;
};
test::TempDir* DsparkTest::dir_ = nullptr;
std::string* DsparkTest::dspark_ = nullptr;
Model* DsparkTest::model_ = nullptr;

TEST_F(DsparkTest, OpensTheGeneratedFile) {
    const auto h = DsparkHead::open(*model_, *dspark_);
    const DsparkInfo& i = h->info();
    EXPECT_EQ(i.stages, 3u);
    EXPECT_EQ(i.block_size, 5u);
    EXPECT_EQ(i.noise_token, model_->config().n_vocab - 1);
    EXPECT_GE(i.markov_rank, 32u);
    EXPECT_EQ(i.target_layers, (std::vector<uint32_t>{3, 4, 5}));
    EXPECT_EQ(h->window(), int64_t(model_->config().window));
    // Stage s uses trunk layer s's per-layer parameters.
    for (uint32_t s = 0; s < 3; ++s) EXPECT_EQ(h->stage(s).recipe().as_layer, s);
}

TEST_F(DsparkTest, MetadataSpellingsAndErrorsNameTheKey) {
    using gguf::Value;
    // The three spellings, the first found winning.
    std::string bs = "dspark.block_size";
    {
        const std::string p = dir_->file("spelled.gguf");
        rewrite(*dspark_, p, {.drop_keys = {bs}, .set = {{"deepseek4.dspark_block_size", Value::u32(3)}}});
        EXPECT_EQ(DsparkHead::open(*model_, p)->info().block_size, 3u);
        rewrite(*dspark_, p, {.set = {{"deepseek4.dspark.block_size", Value::u32(4)}}});
        EXPECT_EQ(DsparkHead::open(*model_, p)->info().block_size, 4u);
    }
    struct Case {
        Edit edit;
        std::string want;
    };
    const std::vector<Case> cases = {
        {{.drop_keys = {bs}}, "block_size missing"},
        {{.set = {{bs, Value::u32(17)}}}, "dspark.block_size = 17"},
        {{.set = {{bs, Value::u32(0)}}}, "dspark.block_size = 0"},
        {{.set = {{bs, Value::i32(5)}}}, "dspark.block_size is a"},
        {{.set = {{"dspark.markov_rank", Value::u32(0)}}}, "dspark.markov_rank = 0"},
        {{.set = {{"dspark.noise_token_id", Value::u32(512)}}}, "dspark.noise_token_id = 512"},
        {{.drop_keys = {"dspark.noise_token_id"}}, "noise_token_id missing"},
        {{.set = {{"dspark.target_layer_ids", Value::array_u32({4, 3})}}}, "dspark.target_layer_ids"},
        {{.set = {{"dspark.target_layer_ids", Value::array_u32({})}}}, "dspark.target_layer_ids"},
        {{.set = {{"dspark.target_layer_ids", Value::array_i32({2, 6})}}}, "dspark.target_layer_ids[1] = 6"},
        {{.set = {{"dspark.target_layer_ids", Value::u32(5)}}}, "dspark.target_layer_ids is not an array"},
        {{.drop_keys = {"dspark.target_layer_ids"}}, "target_layer_ids missing"},
    };
    for (const Case& c : cases) {
        const std::string msg = open_error(c.edit);
        EXPECT_NE(msg.find(c.want), std::string::npos) << "want '" << c.want << "' in: " << msg;
    }
    // i32 target layers are read too.
    EXPECT_EQ(open_error({.set = {{"dspark.target_layer_ids", Value::array_i32({3, 4, 5})}}}), "");
}

TEST_F(DsparkTest, TensorErrorsNameTheTensor) {
    const auto h = DsparkHead::open(*model_, *dspark_);
    const int64_t D = model_->config().n_embd, R = h->info().markov_rank;
    const std::vector<std::pair<Edit, std::string>> cases = {
        {{.drop_tensors = {"mtp.0.main_proj.weight"}}, "mtp.0.main_proj.weight"},
        {{.drop_tensors = {"mtp.0.main_norm.weight"}}, "mtp.0.main_norm.weight"},
        {{.drop_tensors = {"mtp.1.attn_kv.weight"}}, "mtp.1.attn_kv.weight"},
        {{.drop_tensors = {"mtp.2.confidence_head.proj.weight"}}, "mtp.2.confidence_head.proj.weight"},
        {{.reshape = {{"mtp.2.markov_head.markov_w1.weight", {R, 511}}}}, "mtp.2.markov_head.markov_w1.weight"},
        {{.reshape = {{"mtp.0.main_proj.weight", {2 * D, D}}}}, "mtp.0.main_proj.weight"},
        {{.reshape = {{"mtp.2.hc_head_scale.weight", {2}}}}, "mtp.2.hc_head_scale.weight"},
        {{.reshape = {{"mtp.0.ffn_down_shexp.weight", {2 * D, D}}}}, "mtp.0.ffn_down_shexp.weight"},
    };
    for (const auto& [edit, want] : cases) {
        const std::string msg = open_error(edit);
        EXPECT_NE(msg.find(want), std::string::npos) << "want '" << want << "' in: " << msg;
    }
    // Two stages are not DSpark.
    Edit two;
    const auto f = gguf::File::open(*dspark_);
    for (const gguf::TensorInfo& t : f->tensors())
        if (t.name.rfind("mtp.2.", 0) == 0) two.drop_tensors.insert(t.name);
    const std::string msg = open_error(two);
    EXPECT_NE(msg.find("2 DSpark stages"), std::string::npos) << msg;
}

// The context rows are per position: committing a prompt at once, row by row, or after a
// rewind gives the same block bit for bit; the window ends at the last committed row.
TEST_F(DsparkTest, ContextRowsDoNotDependOnHowTheyCame) {
    const auto h = DsparkHead::open(*model_, *dspark_);
    const size_t T = h->info().target_layers.size();
    const auto tokens = test::random_token_ids(30, model_->config().n_vocab, 3);
    const std::vector<float> cap = captures(*h, tokens);
    const int64_t n = 30, W = h->window();

    DsparkContext whole = h->new_context();
    h->commit(whole, 0, n, cap.data());
    EXPECT_EQ(whole.end(), n);
    EXPECT_EQ(whole.begin(), n - W - 1);
    const DsparkBlock want = h->draft(whole, n - 1, tokens.back(), 0.5f);
    ASSERT_EQ(want.proposals.size(), 5u);

    DsparkContext one = h->new_context();
    for (int64_t t = 0; t < n; ++t) h->commit(one, t, 1, rows(cap, T, n, t, t + 1).data());
    EXPECT_EQ(one.begin(), whole.begin());
    EXPECT_EQ(h->draft(one, n - 1, tokens.back(), 0.5f).logits, want.logits);

    // A rewind to 25 then the same rows again; and other rows at 25.. then a rewind back.
    DsparkContext re = h->new_context();
    h->commit(re, 0, n, cap.data());
    h->commit(re, 25, 0, nullptr);
    EXPECT_EQ(re.end(), 25);
    EXPECT_THROW(h->draft(re, n - 1, tokens.back(), 0.5f), Error);
    const auto other = captures(*h, test::random_token_ids(30, model_->config().n_vocab, 4));
    h->commit(re, 25, 5, rows(other, T, n, 25, 30).data());
    const DsparkBlock changed = h->draft(re, n - 1, tokens.back(), 0.5f);
    EXPECT_NE(changed.logits, want.logits);
    h->commit(re, 25, 5, rows(cap, T, n, 25, 30).data());
    EXPECT_EQ(h->draft(re, n - 1, tokens.back(), 0.5f).logits, want.logits);

    // A gap restarts the context; the window only holds what came after it.
    DsparkContext gap = h->new_context();
    h->commit(gap, 0, 10, rows(cap, T, n, 0, 10).data());
    h->commit(gap, 20, 10, rows(cap, T, n, 20, 30).data());
    EXPECT_EQ(gap.begin(), 20);
    const DsparkBlock short_window = h->draft(gap, n - 1, tokens.back(), 0.5f);
    EXPECT_NE(short_window.logits, want.logits);  // the window's rows matter

    // The block itself: the cut is the confident prefix; the chain starts from the token.
    EXPECT_NE(h->draft(whole, n - 1, (tokens.back() + 1) % 512, 0.5f).logits, want.logits);
    for (float th : {0.0f, 0.3f, 0.5f, 0.9f}) {
        const DsparkBlock b = h->draft(whole, n - 1, tokens.back(), th);
        int cut = 0;
        while (cut < 5 && (th <= 0 || b.confidence[size_t(cut)] >= th)) ++cut;
        EXPECT_EQ(b.cut, cut) << th;
        EXPECT_EQ(b.proposals, want.proposals);
    }
}

}  // namespace
}  // namespace ds4::deepseek4

namespace ds4::speculative {
namespace {

// The real-vocabulary tiny model (as engine_test) and its DSpark file.
class DsparkDrafterTest : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        dspark_ = new std::string(dir_->file("dspark.gguf"));
        const std::string p = dir_->file("tiny.gguf");
        const auto r = test::write_tiny_model(p, {"--indexer-heads", "16", "--dspark-out", *dspark_});
        ASSERT_EQ(r.exit_code, 0) << r.output;
        model_ = deepseek4::Model::load(p, {.threads = 2}).release();
        tok_ = tokenizer::Tokenizer::from_gguf(model_->file()).release();
    }
    static void TearDownTestSuite() {
        delete tok_;
        delete model_;
        delete dspark_;
        delete dir_;
    }
    static std::vector<int32_t> ids(size_t n, uint64_t seed) {
        auto v = test::random_token_ids(n, model_->config().n_vocab, seed);
        for (auto& t : v)
            if (t == tok_->special().eos) t = 1;
        return v;
    }
    static engine::Engine make(int64_t chunk) {
        return engine::Engine(*model_, *tok_, {.ctx = 1024, .prefill_chunk = chunk});
    }
    // Greedy output of `prompt` with drafter d (nullptr: none), checking the held tokens.
    static std::vector<int32_t> generate(const std::vector<int32_t>& prompt, int64_t chunk, engine::Drafter* d,
                                         engine::GeneratorUsage* usage = nullptr) {
        engine::Engine e = make(chunk);
        if (d) e.set_drafter(d);
        e.sync(prompt);
        std::vector<int32_t> out;
        e.generate({.sampling = {.temperature = 0}, .max_tokens = 24, .max_draft = d ? 4 : 0}, [&](int32_t id) {
            out.push_back(id);
            return true;
        });
        if (usage) *usage = e.usage();
        return out;
    }

    static test::TempDir* dir_;
    static std::string* dspark_;
    static deepseek4::Model* model_;
    static tokenizer::Tokenizer* tok_;
};
test::TempDir* DsparkDrafterTest::dir_ = nullptr;
std::string* DsparkDrafterTest::dspark_ = nullptr;
deepseek4::Model* DsparkDrafterTest::model_ = nullptr;
tokenizer::Tokenizer* DsparkDrafterTest::tok_ = nullptr;

// Overwrites an F32 tensor of a GGUF in place.
void patch(const std::string& path, const std::string& name, const std::vector<float>& values) {
    auto f = gguf::File::open(path);
    const gguf::TensorInfo& t = f->tensor(name);
    ASSERT_EQ(t.type, TensorType::F32) << name;
    ASSERT_EQ(t.n_bytes, values.size() * sizeof(float)) << name;
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    const ssize_t w = ::pwrite(fd, values.data(), t.n_bytes, off_t(f->data_offset() + t.offset));
    ::close(fd);
    ASSERT_EQ(size_t(w), t.n_bytes);
}

// A random DSpark file's row 0 almost never agrees with the trunk: no drafts, same output.
TEST_F(DsparkDrafterTest, UnrelatedBlocksAreNotProposed) {
    const auto prompt = ids(40, 8);
    const auto want = generate(prompt, 64, nullptr);
    auto head = deepseek4::DsparkHead::open(*model_, *dspark_);
    DsparkDrafter d(*head, {.threshold = 0});
    EXPECT_EQ(d.needs().capture, (std::vector<uint32_t>{3, 4, 5}));
    EXPECT_EQ(d.needs().tail, head->window() + 1);
    EXPECT_EQ(generate(prompt, 64, &d), want);
    EXPECT_GT(d.stats().blocks, 0);
    EXPECT_EQ(d.stats().missing, 0);  // every step found its context row
    EXPECT_GT(d.stats().mismatch, 0);
}

// The Markov head rewritten into a bigram table of the plain greedy output (prev -> the first
// token that followed it), strong enough to decide every row: the drafter then proposes what
// the trunk will say, wherever the table is right. Verified output = plain output, at prefill
// chunks 1 and 64, with drafts proposed and accepted.
TEST_F(DsparkDrafterTest, VerifiedBlocksGiveThePlainGreedyOutput) {
    const auto prompt = ids(80, 8);
    const auto want = generate(prompt, 64, nullptr);
    ASSERT_EQ(generate(prompt, 1, nullptr), want);

    const std::string table = dir_->file("table.gguf");
    std::filesystem::copy_file(*dspark_, table, std::filesystem::copy_options::overwrite_existing);
    const int64_t V = model_->config().n_vocab;
    int64_t R = 0;
    {
        const auto f = gguf::File::open(table);
        R = f->tensor("mtp.2.markov_head.markov_w1.weight").ne[0];
    }
    std::vector<float> w1(size_t(V * R), 0.0f), w2(size_t(V * R), 0.0f);
    std::map<int32_t, int32_t> next_of;
    int32_t prev = prompt.back();
    for (int32_t id : want) {
        next_of.emplace(prev, id);
        prev = id;
    }
    ASSERT_LE(int64_t(next_of.size()), R);
    int64_t slot = 0;
    for (const auto& [from, to] : next_of) {
        w1[size_t(from * R + slot)] = 1.0f;
        w2[size_t(to * R + slot)] = 1.0e4f;
        ++slot;
    }
    patch(table, "mtp.2.markov_head.markov_w1.weight", w1);
    patch(table, "mtp.2.markov_head.markov_w2.weight", w2);

    auto head = deepseek4::DsparkHead::open(*model_, table);
    for (int64_t chunk : {1, 64}) {
        SCOPED_TRACE(chunk);
        DsparkDrafter d(*head, {.threshold = 0});
        engine::GeneratorUsage u;
        EXPECT_EQ(generate(prompt, chunk, &d, &u), want);
        EXPECT_GT(u.drafted, 0);
        EXPECT_GT(u.accepted, 0);
        EXPECT_LT(u.steps, int64_t(want.size()) - 1);  // several tokens per step
        EXPECT_EQ(d.stats().missing, 0);
        EXPECT_EQ(d.stats().drafted, u.drafted);
    }
    // A confidence threshold only shortens the blocks.
    DsparkDrafter cut(*head, {.threshold = 0.7f});
    EXPECT_EQ(generate(prompt, 64, &cut), want);
}

// The drafter's context rows are saved with the sequence (the state's drafter section) and
// restored on load: the restored context gives the very blocks of the uninterrupted one. A file
// with other weights (one tensor changed) or a state without the section leaves the drafter
// empty (it starts again from the next rows).
TEST_F(DsparkDrafterTest, ContextRowsAreSavedAndRestoredWithTheSequence) {
    auto head = deepseek4::DsparkHead::open(*model_, *dspark_);
    DsparkDrafter a(*head, {.threshold = 0});
    engine::Engine ea = make(16);
    ea.set_drafter(&a);
    ea.sync(ids(70, 31));
    ea.generate({.sampling = {.temperature = 0}, .max_tokens = 8, .max_draft = 4}, [](int32_t) { return true; });
    const std::vector<uint8_t> state = ea.save_state();
    const auto section = model::drafter_section(state);
    ASSERT_TRUE(section);
    EXPECT_EQ(section->kind, "dspark");

    DsparkDrafter b(*head, {.threshold = 0});
    engine::Engine eb = make(16);
    eb.set_drafter(&b);
    ASSERT_TRUE(eb.load_state(state));
    ASSERT_EQ(b.context().end(), ea.pos());
    EXPECT_EQ(b.context().begin(), a.context().begin());
    const int64_t p = ea.pos() - 1;
    const int32_t x = ea.tokens().back();
    const deepseek4::DsparkBlock want = head->draft(a.context(), p, x, 0), got = head->draft(b.context(), p, x, 0);
    EXPECT_EQ(got.logits, want.logits);
    EXPECT_EQ(got.confidence_logits, want.confidence_logits);

    const std::string other = dir_->file("other_dspark.gguf");
    std::filesystem::copy_file(*dspark_, other, std::filesystem::copy_options::overwrite_existing);
    {
        const auto f = gguf::File::open(other);
        const gguf::TensorInfo& t = f->tensor("mtp.0.attn_norm.weight");
        patch(other, t.name, std::vector<float>(size_t(t.n_elements()), 0.5f));
    }
    auto other_head = deepseek4::DsparkHead::open(*model_, other);
    DsparkDrafter c(*other_head, {.threshold = 0});
    engine::Engine ec = make(16);
    ec.set_drafter(&c);
    EXPECT_FALSE(ec.load_state(state));
    EXPECT_EQ(c.context().end(), 0);
    DsparkDrafter d(*head, {.threshold = 0});
    engine::Engine ed = make(16);
    ed.set_drafter(&d);
    EXPECT_FALSE(ed.load_state(model_->save_state(ea.session().sequence())));
    EXPECT_EQ(d.context().end(), 0);
}

}  // namespace
}  // namespace ds4::speculative
