// Layer ranges (model/layer_range.h): a model opened for "A:B" or "A:output" validates, binds
// and (with --no-mmap) reads only that range's tensors; chaining 0:a, a+1:b, b+1:output
// through embed / eval_layers / head gives logits bit-identical to the whole model, in prefill
// and decode; a tensor of the range missing from the file is an error naming it.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/deepseek4/model.h"
#include "model/session.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

using model::LayerRange;

std::string generate(const test::TempDir& dir, const std::string& name, const std::vector<std::string>& args) {
    return test::generate_model(dir, name, args);
}

TEST(LayerRange, ParsesAndRejects) {
    EXPECT_EQ(LayerRange::parse("", 6), (LayerRange{0, 5, true}));
    EXPECT_EQ(LayerRange::parse("0:2", 6), (LayerRange{0, 2, false}));
    EXPECT_EQ(LayerRange::parse("3:output", 6), (LayerRange{3, 5, true}));
    EXPECT_EQ(LayerRange::parse("5:5", 6), (LayerRange{5, 5, false}));
    EXPECT_EQ(LayerRange::parse("0:output", 6).str(), "0:output");
    EXPECT_EQ(LayerRange::parse("2:4", 6).str(), "2:4");
    EXPECT_TRUE(LayerRange::parse("0:output", 6).whole(6));
    EXPECT_FALSE(LayerRange::parse("0:5", 6).whole(6));  // the head is not included
    for (const char* bad : {"3", "a:2", "2:b", "4:2", "0:6", "6:output", "-1:2", ":3", "1:", "1:2:3", " 1:2"})
        EXPECT_THROW(LayerRange::parse(bad, 6), Error) << bad;
    try {
        LayerRange::parse("0:9", 6);
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("0 <= A <= B <= 5"), std::string::npos) << e.what();
    }
}

struct Chain {
    std::vector<std::unique_ptr<Model>> models;
    std::vector<std::unique_ptr<model::Sequence>> seqs;
};

// Evaluates `ids` in `chunks` through the chained ranges, logits of every position.
std::vector<float> run_chain(Chain& c, const std::vector<int32_t>& ids, const std::vector<int64_t>& chunks) {
    const int64_t V = c.models.back()->config().n_vocab, H = c.models[0]->info().hidden_size;
    std::vector<float> out(ids.size() * size_t(V));
    int64_t at = 0;
    for (int64_t n : chunks) {
        std::vector<float> hidden(static_cast<size_t>(n * H));
        for (size_t k = 0; k < c.models.size(); ++k) {
            const model::BatchItem it{c.seqs[k].get(), {ids.data() + at, size_t(n)}, model::Logits::All,
                                      out.data() + at * V};
            const model::Batch b(&it, 1);
            if (k == 0) c.models[k]->embed(b, hidden.data());
            c.models[k]->eval_layers(b, hidden.data());
            if (k + 1 == c.models.size()) c.models[k]->head(b, hidden.data());
        }
        at += n;
    }
    return out;
}

TEST(LayerRange, ChainedRangesEqualTheWholeModel) {
    test::TempDir dir;
    const std::string path = generate(dir, "tiny.gguf", {"--preset", "tiny", "--seed", "5"});
    auto whole = Model::load(path, {.threads = 2});
    const int64_t V = whole->config().n_vocab;
    const auto ids = test::random_token_ids(200, V, 8);
    std::vector<int64_t> chunks = {64, 64, 30};  // prefill, then decode
    chunks.insert(chunks.end(), 42, 1);
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
        Chain c;
        for (const char* r : {"0:1", "2:3", "4:output"}) {
            c.models.push_back(Model::load(path, {.threads = 2, .load = load, .layers = r}));
            c.seqs.push_back(c.models.back()->new_sequence({.ctx = 256}));
        }
        EXPECT_EQ(c.models[1]->info().range, (LayerRange{2, 3, false}));
        const std::vector<float> got = run_chain(c, ids, chunks);
        ASSERT_EQ(got.size(), ref.size());
        EXPECT_EQ(std::memcmp(got.data(), ref.data(), ref.size() * sizeof(float)), 0)
            << (load == gguf::File::Load::Copy ? "copied" : "mapped") << " ranges differ from the whole model";
        // Each range holds its own layers' state; the head-less middle range cannot give logits.
        for (const auto& s : c.seqs) EXPECT_EQ(s->pos(), int64_t(ids.size()));
        std::vector<float> h(static_cast<size_t>(c.models[1]->info().hidden_size)), l(static_cast<size_t>(V));
        const model::BatchItem it{c.seqs[1].get(), {ids.data(), 1}, model::Logits::Last, l.data()};
        EXPECT_THROW(c.models[1]->head(model::Batch(&it, 1), h.data()), Error);
        EXPECT_THROW(c.models[1]->embed(model::Batch(&it, 1), h.data()), Error);
        EXPECT_THROW(c.models[1]->eval(model::Batch(&it, 1)), Error);
    }
}

TEST(LayerRange, CopyLoadReadsOnlyTheRangesTensors) {
    test::TempDir dir;
    const std::string path = generate(dir, "tiny.gguf", {"--preset", "tiny"});
    auto m = Model::load(path, {.load = gguf::File::Load::Copy, .layers = "2:3"});
    int held = 0, skipped = 0;
    for (const auto& t : m->file().tensors()) {
        const bool mine = t.name.rfind("blk.2.", 0) == 0 || t.name.rfind("blk.3.", 0) == 0;
        EXPECT_EQ(m->file().holds(t), mine) << t.name;
        (mine ? held : skipped)++;
    }
    EXPECT_GT(held, 0);
    EXPECT_GT(skipped, 0);
    // The bytes held are those of the file (the range's tensors are really read).
    auto mapped = gguf::File::open(path);
    const auto& t = mapped->tensor("blk.3.attn_q_b.weight");
    EXPECT_EQ(std::memcmp(mapped->data(t), m->file().data(m->file().tensor(t.name)), t.n_bytes), 0);
}

// `src` without the tensors `drop` (a hand-made split file).
void copy_without(const std::string& src, const std::string& dst, const std::vector<std::string>& drop) {
    auto f = gguf::File::open(src);
    gguf::Writer w(dst, f->alignment());
    for (const auto& [k, v] : f->metadata())
        if (k != "general.alignment") w.set(k, v);
    auto dropped = [&](const std::string& n) { return std::find(drop.begin(), drop.end(), n) != drop.end(); };
    for (const auto& t : f->tensors())
        if (!dropped(t.name)) w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
    w.begin_data();
    for (const auto& t : f->tensors())
        if (!dropped(t.name)) w.write_tensor(t.name, {f->data(t), size_t(t.n_bytes)});
    w.finish();
}

TEST(LayerRange, MissingTensorOfTheRangeIsNamed) {
    test::TempDir dir;
    const std::string path = generate(dir, "tiny.gguf", {"--preset", "tiny"});
    const std::string split = dir.file("split.gguf");
    copy_without(path, split, {"blk.3.attn_q_b.weight", "output.weight"});
    EXPECT_NO_THROW(Model::load(split, {.layers = "0:2"}));
    EXPECT_NO_THROW(Model::load(split, {.load = gguf::File::Load::Copy, .layers = "4:5"}));
    for (const char* r : {"2:3", "3:4", "4:output", ""}) {
        try {
            Model::load(split, {.layers = r});
            ADD_FAILURE() << r << ": loaded without its tensor";
        } catch (const Error& e) {
            const std::string msg = e.what();
            const bool q_b = msg.find("blk.3.attn_q_b.weight") != std::string::npos;
            const bool out = msg.find("output.weight") != std::string::npos;
            EXPECT_TRUE(q_b || out) << msg;
            EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
        }
    }
    EXPECT_THROW(Model::load(path, {.layers = "0:6"}), Error);
}

}  // namespace
}  // namespace ds4::deepseek4
