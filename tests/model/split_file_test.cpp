// Split files (model/deepseek4/split.h, tools/ds4-gguf-split): the halves 0:2 and 3:output of a
// tiny model, each opened with its range and chained through embed / eval_layers / head, give
// logits bit-identical to the whole model (prefill and decode); together they hold every
// tensor of the model byte for byte, once; they keep its metadata hash (a state saved by a
// range of the whole file loads into the split); opening a split for layers it lacks fails
// naming the tensor and the range the file holds; bad inputs and ranges are refused with
// nothing written; --inspect reports the range.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/split.h"
#include "model/session.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

using model::LayerRange;

test::RunResult split(const std::string& in, const std::string& layers, const std::string& out) {
    return test::run_command({test::binary("ds4-gguf-split"), "-m", in, "--layers", layers, "-o", out});
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One model file split into halves by the tool, shared by the tests (generated once).
class SplitFile : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        whole_ = test::generate_model(*dir_, "tiny.gguf", {"--preset", "tiny", "--seed", "5"});
        half1_ = dir_->file("half1.gguf");
        half2_ = dir_->file("half2.gguf");
        const auto a = split(whole_, "0:2", half1_), b = split(whole_, "3:output", half2_);
        ASSERT_EQ(a.exit_code, 0) << a.output;
        ASSERT_EQ(b.exit_code, 0) << b.output;
        EXPECT_TRUE(contains(a.output, "layers 0:2")) << a.output;
    }
    static void TearDownTestSuite() { delete dir_; }
    static inline test::TempDir* dir_ = nullptr;
    static inline std::string whole_, half1_, half2_;
};

TEST_F(SplitFile, HalvesChainedEqualTheWholeModel) {
    auto whole = Model::load(whole_, {.threads = 2});
    const int64_t V = whole->config().n_vocab, H = whole->info().hidden_size;
    const auto ids = test::random_token_ids(140, V, 3);
    std::vector<int64_t> chunks = {64, 64};  // prefill, then decode steps
    chunks.insert(chunks.end(), 12, 1);
    std::vector<float> ref;
    {
        model::Session s(*whole, {.ctx = 256, .prefill_chunk = 64});
        std::vector<float> part;
        int64_t at = 0;
        for (int64_t n : chunks) {
            s.eval(std::vector<int32_t>(ids.begin() + at, ids.begin() + at + n), &part, true);
            ref.insert(ref.end(), part.begin(), part.end());
            at += n;
        }
    }
    for (auto load : {gguf::File::Load::Map, gguf::File::Load::Copy}) {
        auto m1 = Model::load(half1_, {.threads = 2, .load = load, .layers = "0:2"});
        auto m2 = Model::load(half2_, {.threads = 2, .load = load, .layers = "3:output"});
        EXPECT_EQ(m1->info().range, (LayerRange{0, 2, false}));
        EXPECT_EQ(m2->info().range, (LayerRange{3, 5, true}));
        auto s1 = m1->new_sequence({.ctx = 256}), s2 = m2->new_sequence({.ctx = 256});
        std::vector<float> got(ids.size() * size_t(V));
        int64_t at = 0;
        for (int64_t n : chunks) {
            std::vector<float> hidden(static_cast<size_t>(n * H));
            const model::BatchItem i1{s1.get(), {ids.data() + at, size_t(n)}, model::Logits::None, nullptr};
            const model::BatchItem i2{s2.get(), {ids.data() + at, size_t(n)}, model::Logits::All, got.data() + at * V};
            m1->embed(model::Batch(&i1, 1), hidden.data());
            m1->eval_layers(model::Batch(&i1, 1), hidden.data());
            m2->eval_layers(model::Batch(&i2, 1), hidden.data());
            m2->head(model::Batch(&i2, 1), hidden.data());
            at += n;
        }
        ASSERT_EQ(got.size(), ref.size());
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0)
            << (load == gguf::File::Load::Copy ? "copied" : "mapped") << " halves differ from the whole model";
    }
}

TEST_F(SplitFile, HalvesHoldEveryTensorOnceByteForByte) {
    const auto w = gguf::File::open(whole_), a = gguf::File::open(half1_), b = gguf::File::open(half2_);
    EXPECT_EQ(split_layers(*w), std::nullopt);
    EXPECT_EQ(split_layers(*a), "0:2");
    EXPECT_EQ(split_layers(*b), "3:output");
    EXPECT_EQ(a->tensors().size() + b->tensors().size(), w->tensors().size());
    uint64_t split_bytes = 0;
    for (const auto* f : {a.get(), b.get()}) {
        EXPECT_EQ(f->alignment(), w->alignment());
        for (const auto& t : f->tensors()) split_bytes += t.n_bytes;
    }
    uint64_t whole_bytes = 0;
    for (const auto& t : w->tensors()) {
        whole_bytes += t.n_bytes;
        const auto* ta = a->find_tensor(t.name);
        const auto* tb = b->find_tensor(t.name);
        ASSERT_NE(!ta, !tb) << t.name << " must be in exactly one half";
        const auto& f = ta ? *a : *b;
        const auto& ts = ta ? *ta : *tb;
        EXPECT_EQ(ts.type, t.type) << t.name;
        EXPECT_EQ(ts.ne, t.ne) << t.name;
        EXPECT_EQ(ts.offset % f.alignment(), 0u) << t.name;
        ASSERT_EQ(ts.n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(f.data(ts), w->data(t), t.n_bytes), 0) << t.name;
        const bool first = t.name.rfind("token_embd", 0) == 0 || t.name.rfind("blk.0.", 0) == 0 ||
                           t.name.rfind("blk.1.", 0) == 0 || t.name.rfind("blk.2.", 0) == 0;
        EXPECT_EQ(bool(ta), first) << t.name;
    }
    EXPECT_EQ(split_bytes, whole_bytes);
    // Every metadata key of the model, unchanged, in order; the split adds only its range.
    for (const auto* f : {a.get(), b.get()}) {
        ASSERT_EQ(f->metadata().size(), w->metadata().size() + 1);
        for (size_t i = 0; i < w->metadata().size(); ++i) {
            EXPECT_EQ(f->metadata()[i].first, w->metadata()[i].first);
            EXPECT_EQ(f->metadata()[i].second.to_string(1 << 20), w->metadata()[i].second.to_string(1 << 20));
        }
        EXPECT_EQ(f->metadata().back().first, kSplitLayersKey);
    }
}

TEST_F(SplitFile, SameMetadataHashAndStatesCarryOver) {
    auto whole = Model::load(whole_, {.layers = "3:output"});
    auto m2 = Model::load(half2_, {.layers = "3:output"});
    auto m1 = Model::load(half1_, {.layers = "0:2"});
    EXPECT_EQ(m2->info().metadata_hash, whole->info().metadata_hash);
    EXPECT_EQ(m1->info().metadata_hash, whole->info().metadata_hash);
    // A state of layers 3:output saved from the whole file loads into the split file's model.
    auto front = Model::load(whole_, {.layers = "0:2"});
    auto sf = front->new_sequence({.ctx = 64}), sw = whole->new_sequence({.ctx = 64});
    const std::vector<int32_t> ids = {5, 9, 200, 7};
    std::vector<float> hidden(ids.size() * size_t(whole->info().hidden_size));
    const model::BatchItem i1{sf.get(), ids, model::Logits::None, nullptr};
    const model::BatchItem i2{sw.get(), ids, model::Logits::None, nullptr};
    front->embed(model::Batch(&i1, 1), hidden.data());
    front->eval_layers(model::Batch(&i1, 1), hidden.data());
    whole->eval_layers(model::Batch(&i2, 1), hidden.data());
    const auto bytes = whole->save_state(*sw, {});
    auto into = m2->new_sequence({.ctx = 64});
    EXPECT_NO_THROW(m2->load_state(bytes, *into));
    EXPECT_EQ(into->pos(), int64_t(ids.size()));
}

TEST_F(SplitFile, OpeningForLayersItLacksNamesTheTensorAndTheRangeItHolds) {
    struct Case { std::string path, layers, tensor, held; };
    for (const Case& c : std::vector<Case>{{half1_, "", "blk.3.", "0:2"},
                                           {half1_, "2:3", "blk.3.", "0:2"},
                                           {half1_, "0:output", "blk.3.", "0:2"},
                                           {half2_, "", "token_embd.weight", "3:output"},
                                           {half2_, "2:output", "blk.2.", "3:output"}}) {
        try {
            model::open(c.path, {.layers = c.layers});
            ADD_FAILURE() << c.path << " opened for '" << c.layers << "'";
        } catch (const Error& e) {
            const std::string msg = e.what();
            EXPECT_TRUE(contains(msg, "tensor " + c.tensor)) << msg;
            EXPECT_TRUE(contains(msg, "missing")) << msg;
            EXPECT_TRUE(contains(msg, "--layers " + c.held)) << msg;
        }
    }
    // A range inside the one the file holds is fine.
    EXPECT_NO_THROW(model::open(half1_, {.layers = "1:2"}));
    EXPECT_NO_THROW(model::open(half2_, {.layers = "5:output"}));
}

TEST_F(SplitFile, SplitOfASplitAndRefusals) {
    // The input may be a split holding the range; the written file records the new range.
    const std::string quarter = dir_->file("q.gguf");
    const auto ok = split(half2_, "4:5", quarter);
    ASSERT_EQ(ok.exit_code, 0) << ok.output;
    EXPECT_EQ(split_layers(*gguf::File::open(quarter)), "4:5");
    EXPECT_NO_THROW(model::open(quarter, {.layers = "4:5"}));

    const std::string out = dir_->file("refused.gguf");
    struct Case { std::string in, layers, out, message; };
    // A non-deepseek4 GGUF.
    const std::string other = dir_->file("other.gguf");
    {
        gguf::Writer w(other);
        w.set("general.architecture", gguf::Value::str("llama"));
        w.add_tensor("x", TensorType::F32, {4});
        w.begin_data();
        const float x[4] = {};
        w.write_tensor("x", {reinterpret_cast<const uint8_t*>(x), sizeof x});
        w.finish();
    }
    for (const Case& c : std::vector<Case>{{whole_, "0:6", out, "layer out of range"},
                                           {whole_, "4:2", out, "the first layer is after the last"},
                                           {whole_, "3", out, "no ':'"},
                                           {half1_, "2:3", out, "--layers 0:2"},
                                           {other, "0:1", out, "not a deepseek4 model"},
                                           {whole_, "0:1", whole_, "names the input"},
                                           {dir_->file("absent.gguf"), "0:1", out, "absent.gguf"}}) {
        const auto r = split(c.in, c.layers, c.out);
        EXPECT_EQ(r.exit_code, 1) << c.layers << ": " << r.output;
        EXPECT_TRUE(contains(r.output, c.message)) << r.output;
        EXPECT_FALSE(std::filesystem::exists(out)) << c.layers;
    }
    // The refused self-overwrite left the input as it was, and no temporary behind.
    EXPECT_EQ(split_layers(*gguf::File::open(whole_)), std::nullopt);
    for (const auto& e : std::filesystem::directory_iterator(dir_->path()))
        EXPECT_EQ(e.path().extension(), ".gguf") << e.path();
    // A missing option is a usage error (CLI11's status), naming the option.
    const auto usage = test::run_command({test::binary("ds4-gguf-split"), "-m", whole_, "-o", out});
    EXPECT_NE(usage.exit_code, 0);
    EXPECT_NE(usage.exit_code, 1);
    EXPECT_TRUE(contains(usage.output, "--layers")) << usage.output;
}

TEST_F(SplitFile, InspectReportsTheRangeAndHelpDocumentsTheTool) {
    const auto r = test::run_command({test::binary("ds4"), "--inspect", half2_});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "ds4.split.layers")) << r.output;
    EXPECT_TRUE(contains(r.output, "split file: holds layers 3:output of 6")) << r.output;
    EXPECT_TRUE(contains(r.output, "open it with --layers 3:output")) << r.output;
    const auto h = test::run_command({test::binary("ds4-gguf-split"), "--help"});
    EXPECT_EQ(h.exit_code, 0);
    for (const char* part : {"--model", "--layers", "--output", "--quiet", "A:output", "ds4.split.layers",
                             "metadata hash", "Exit status"})
        EXPECT_TRUE(contains(h.output, part)) << part;
}

}  // namespace
}  // namespace ds4::deepseek4
