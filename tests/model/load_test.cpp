// Loading real-sized and inconsistent files: the published Flash and PRO layouts (as sparse
// files) load and validate; a file whose metadata contradicts its tensors fails with a message
// naming the tensor; a 2-layer file with the real Flash dimensions and q2 types runs.
#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
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

std::string generate(const test::TempDir& dir, const std::string& name, const std::vector<std::string>& args) {
    return test::generate_model(dir, name, args);
}

TEST(ModelLoad, SparseFullFlashLayoutLoadsAndValidates) {
    test::TempDir dir;
    const std::string path = generate(dir, "flash.gguf", {"--preset", "flash", "--sparse"});
    auto m = Model::load(path);
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.n_layer, 43u);
    EXPECT_EQ(c.n_embd, 4096u);
    EXPECT_EQ(c.n_head, 64u);
    EXPECT_EQ(c.head_dim, 512u);
    EXPECT_EQ(c.n_expert, 256u);
    EXPECT_EQ(c.n_vocab, 129280u);
    EXPECT_EQ(m->file().tensors().size(), 1328u);
    EXPECT_EQ(m->weights().layers[10].gate_exps.all.type, TensorType::IQ2_XXS);
    EXPECT_EQ(m->weights().layers[10].down_exps.all.type, TensorType::Q2_K);
    EXPECT_EQ(m->weights().layers[10].q_b.type, TensorType::Q8_0);
    EXPECT_EQ(m->weights().layers[10].down_exps.expert(255).rows, 4096);
}

// spec/ARCHITECTURE.md §1.3: the full PRO layout (61 layers, 384 experts, 16 output groups,
// ratio-128 hash layers) loads; nothing in the loader is pinned to the Flash shape.
TEST(ModelLoad, SparseFullProLayoutLoadsAndValidates) {
    test::TempDir dir;
    const std::string path = generate(dir, "pro.gguf", {"--preset", "pro", "--sparse"});
    auto m = Model::load(path);
    const ModelConfig& c = m->config();
    EXPECT_EQ(c.n_layer, 61u);
    EXPECT_EQ(c.n_embd, 7168u);
    EXPECT_EQ(c.n_head, 128u);
    EXPECT_EQ(c.o_groups, 16u);
    EXPECT_EQ(c.n_expert, 384u);
    EXPECT_EQ(c.expert_ff, 3072u);
    EXPECT_EQ(c.indexer_top_k, 1024u);
    EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
    EXPECT_EQ(c.compress_ratios, ModelConfig::pro().compress_ratios);
    EXPECT_EQ(m->weights().layers[60].gate_exps.all.type, TensorType::IQ2_XXS);
    EXPECT_EQ(m->weights().layers[60].down_exps.expert(383).rows, 7168);
    EXPECT_EQ(m->weights().layers[60].down_exps.expert(383).cols, 3072);
}

// Copies `src` to `dst` with one metadata value replaced.
void copy_with(const std::string& src, const std::string& dst, const std::string& key,
               gguf::Value v) {
    auto f = gguf::File::open(src);
    gguf::Writer w(dst, f->alignment());
    for (const auto& [k, val] : f->metadata())
        if (k != "general.alignment") w.set(k, k == key ? v : val);
    for (const auto& t : f->tensors())
        w.add_tensor(t.name, t.type, std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims));
    w.begin_data();
    for (const auto& t : f->tensors()) w.write_tensor(t.name, {f->data(t), size_t(t.n_bytes)});
    w.finish();
}

TEST(ModelLoad, InconsistentHeadCountNamesTheTensor) {
    test::TempDir dir;
    const std::string good = generate(dir, "tiny.gguf", {"--preset", "tiny"});
    const std::string bad = dir.file("bad.gguf");
    copy_with(good, bad, "deepseek4.attention.head_count", gguf::Value::u32(8));
    EXPECT_NO_THROW(Model::load(good));
    try {
        Model::load(bad);
        FAIL() << "an inconsistent file loaded";
    } catch (const Error& e) {
        const std::string msg = e.what();
        EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
        EXPECT_NE(msg.find("blk.0.attn_q_b.weight"), std::string::npos) << msg;
        EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
    }
}

TEST(ModelLoad, FlashDimensionsTwoLayersRunPrefillAndDecode) {
    test::TempDir dir;
    const std::string path = generate(dir, "flash2.gguf", {"--preset", "flash", "--layers", "2",
                                                           "--ratios", "4,128"});
    auto m = Model::load(path, {.threads = 2});
    model::Session s(*m, {.ctx = 64, .prefill_chunk = 8});
    std::vector<float> logits;
    const std::vector<int32_t> prompt = {0, 100, 2000, 30000, 128000, 7, 8, 9};
    s.eval(prompt, &logits);
    ASSERT_EQ(logits.size(), size_t(m->config().n_vocab));
    double sum = 0, sq = 0;
    for (float v : logits) {
        ASSERT_TRUE(std::isfinite(v));
        sum += v;
        sq += double(v) * v;
    }
    const double mean = sum / double(logits.size());
    EXPECT_GT(sq / double(logits.size()) - mean * mean, 1e-6) << "degenerate logits";
    s.eval({int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin())}, &logits);
    for (float v : logits) ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(s.pos(), 9);
}

}  // namespace
}  // namespace ds4::deepseek4

namespace ds4::deepseek4 {
namespace {

// --no-mmap: the weights read into anonymous memory give the very same model: same tensor
// bytes, same logits.
TEST(ModelLoadCopy, CopiedWeightsEqualMappedOnes) {
    test::TempDir dir;
    const std::string path = generate(dir, "tiny.gguf", {"--preset", "tiny"});
    auto mapped = Model::load(path);
    auto copied = Model::load(path, {.load = gguf::File::Load::Copy});
    ASSERT_EQ(mapped->file().tensors().size(), copied->file().tensors().size());
    for (size_t i = 0; i < mapped->file().tensors().size(); ++i) {
        const auto& t = mapped->file().tensors()[i];
        const uint8_t* a = mapped->file().data(t);
        const uint8_t* b = copied->file().data(copied->file().tensors()[i]);
        ASSERT_NE(a, b);
        ASSERT_TRUE(std::equal(a, a + t.n_bytes, b)) << "tensor " << t.name;
    }
    const auto ids = test::random_token_ids(40, mapped->config().n_vocab, 3);
    std::vector<float> la, lb;
    model::Session(*mapped, {.ctx = 64}).eval(ids, &la, true);
    model::Session(*copied, {.ctx = 64}).eval(ids, &lb, true);
    EXPECT_EQ(la, lb);
    EXPECT_THROW(Model::load(dir.file("missing.gguf"), {.load = gguf::File::Load::Copy}), Error);
}

}  // namespace
}  // namespace ds4::deepseek4
