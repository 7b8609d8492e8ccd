// Extra blocks (model/deepseek4/extra_block.h): trunk layer K's own tensors bound as a block
// outside the trunk, run with their own sequence over the hidden state after layer K-1, give the
// hidden state after layer K bit for bit, over a prefill chunk and decode steps, for a ratio-4
// layer (indexer past its top-k), a ratio-128 layer (compressed rows past position 128) and a
// ratio-0 hash layer; a rewound block sequence evaluates again to the same bits; a bind of a
// missing or wrongly shaped tensor fails naming it.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <cstring>
#include <string>
#include <vector>

#include "common/error.h"
#include "model/deepseek4/extra_block.h"
#include "model/deepseek4/model.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

// 6 layers (ratios 0,0,4,128,4,128; layers 0-2 hash-routed), window 16, indexer top-k 4.
const std::string& tiny_model() {
    static test::TempDir dir;
    static const std::string path =
        test::generate_model(dir, "tiny.gguf", {"--preset", "tiny", "--indexer-heads", "16", "--seed", "5"});
    return path;
}

std::vector<int32_t> token_ids(size_t n, uint32_t vocab) {
    std::vector<int32_t> ids(n);
    uint32_t x = 12345;
    for (auto& id : ids) {
        x = x * 1103515245u + 12345u;
        id = int32_t((x >> 8) % vocab);
    }
    return ids;
}

// The hidden state of `tokens` after the model's layers (it holds layers 0..something).
std::vector<float> hidden_after(Model& m, model::Sequence& seq, std::span<const int32_t> tokens) {
    std::vector<float> X(tokens.size() * size_t(m.info().hidden_size));
    const model::BatchItem it{&seq, tokens};
    m.embed(model::Batch(&it, 1), X.data());
    m.eval_layers(model::Batch(&it, 1), X.data());
    return X;
}

void run_block(ExtraBlock& blk, model::Sequence& seq, std::span<const int32_t> tokens, float* X) {
    const model::BatchItem it{&seq, tokens};
    blk.eval(model::Batch(&it, 1), X);
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

// Layer K as an extra block over the trunk 0..K-1 equals the trunk 0..K: a prefill chunk of
// 140 positions (past the first ratio-128 row and the indexer's top-k), then 8 decode steps;
// then the block sequence rewound by 5 and those steps evaluated again.
void check_layer_as_block(uint32_t K, bool own_file) {
    SCOPED_TRACE(fmt::format("layer {}", K));
    const std::string& path = tiny_model();
    auto before = Model::load(path, {.layers = fmt::format("0:{}", K - 1)});
    auto through = Model::load(path, {.layers = fmt::format("0:{}", K)});
    const ModelConfig& c = before->config();
    const BlockRecipe recipe{fmt::format("blk.{}.", K), K, c.compress_ratio(K), c.is_hash_layer(K)};
    std::unique_ptr<ExtraBlock> blk =
        own_file ? ExtraBlock::open(*before, path, recipe) : ExtraBlock::bind(*before, before->file(), recipe);
    EXPECT_EQ(blk->weights().ratio, int(c.compress_ratio(K)));
    EXPECT_EQ(blk->weights().tid2eid != nullptr, c.is_hash_layer(K));

    // A small rewind slack: attention runs in blocks of the raw ring (blocks/attention_rounds.h).
    const model::SequenceOptions opt{.ctx = 256, .qat = true, .rewind_slack = 8};
    auto s_before = before->new_sequence(opt);
    auto s_through = through->new_sequence(opt);
    auto s_block = blk->new_sequence(opt);
    EXPECT_EQ(s_block->state_bytes(), blk->sequence_bytes(opt));

    const std::vector<int32_t> ids = token_ids(148, c.n_vocab);
    std::vector<size_t> chunks = {140};
    chunks.insert(chunks.end(), 8, 1);
    std::vector<std::vector<float>> inputs, outputs;
    size_t at = 0;
    for (size_t n : chunks) {
        const std::span<const int32_t> toks(ids.data() + at, n);
        std::vector<float> X = hidden_after(*before, *s_before, toks);
        inputs.push_back(X);
        run_block(*blk, *s_block, toks, X.data());
        const std::vector<float> want = hidden_after(*through, *s_through, toks);
        EXPECT_TRUE(same_bits(X, want)) << "positions " << at << ".." << at + n - 1;
        EXPECT_FALSE(same_bits(X, inputs.back())) << "the block changed nothing";
        outputs.push_back(std::move(X));
        at += n;
    }
    EXPECT_EQ(s_block->pos(), int64_t(ids.size()));
    EXPECT_EQ(s_block->tokens(), ids);

    // Rewind 5 positions (within the slack) and evaluate the last 5 decode steps again.
    const int64_t back = int64_t(ids.size()) - 5;
    ASSERT_TRUE(s_block->can_rewind(back));
    s_block->rewind(back);
    EXPECT_EQ(s_block->pos(), back);
    for (size_t k = chunks.size() - 5; k < chunks.size(); ++k) {
        std::vector<float> X = inputs[k];
        run_block(*blk, *s_block, std::span<const int32_t>(ids.data() + back + int64_t(k - (chunks.size() - 5)), 1),
                  X.data());
        EXPECT_TRUE(same_bits(X, outputs[k])) << "decode step " << k << " after the rewind";
    }

    // A clone continues like the original.
    auto copy = s_block->clone();
    EXPECT_EQ(copy->pos(), s_block->pos());
    s_block->clear();
    EXPECT_EQ(s_block->pos(), 0);
    s_block->assign(*copy);
    EXPECT_EQ(s_block->tokens(), ids);
}

TEST(ExtraBlock, Ratio4IndexerLayerEqualsTheTrunkLayer) { check_layer_as_block(4, false); }
TEST(ExtraBlock, Ratio128LayerEqualsTheTrunkLayer) { check_layer_as_block(3, true); }
TEST(ExtraBlock, Ratio0HashLayerEqualsTheTrunkLayer) { check_layer_as_block(1, false); }
TEST(ExtraBlock, Ratio4HashLayerEqualsTheTrunkLayer) { check_layer_as_block(2, false); }

std::string bind_error(Model& m, const BlockRecipe& r) {
    try {
        ExtraBlock::bind(m, m.file(), r);
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

TEST(ExtraBlock, BindFailuresNameTheTensor) {
    auto m = Model::load(tiny_model(), {.layers = "0:1"});
    const std::string missing = bind_error(*m, {"mtp.0.", 1, 0, false});
    EXPECT_NE(missing.find("tensor mtp.0.hc_attn_fn.weight missing"), std::string::npos) << missing;
    EXPECT_NE(missing.find(tiny_model()), std::string::npos) << missing;
    // Layer 2 has ratio 4: its compressor APE is [2*head_dim, 4], not ratio 128's [head_dim, 128].
    const std::string shape = bind_error(*m, {"blk.2.", 2, 128, true});
    EXPECT_NE(shape.find("tensor blk.2.attn_compressor_ape.weight: shape [192, 4] expected [96, 128]"),
              std::string::npos)
        << shape;
    // Layer 4 routes by its biased router: no tid2eid.
    const std::string hash = bind_error(*m, {"blk.4.", 4, 4, true});
    EXPECT_NE(hash.find("tensor blk.4.ffn_gate_tid2eid.weight missing"), std::string::npos) << hash;
    const std::string ratio = bind_error(*m, {"blk.3.", 3, 64, false});
    EXPECT_NE(ratio.find("compression ratio 64"), std::string::npos) << ratio;
    const std::string as_layer = bind_error(*m, {"blk.3.", 6, 128, false});
    EXPECT_NE(as_layer.find("as_layer 6"), std::string::npos) << as_layer;
}

TEST(ExtraBlock, EvalRefusesOtherSequencesAndLogits) {
    auto m = Model::load(tiny_model(), {.layers = "0:2"});
    auto blk = ExtraBlock::bind(*m, m->file(), {"blk.3.", 3, 128, false});
    auto other = ExtraBlock::bind(*m, m->file(), {"blk.3.", 3, 128, false});
    const model::SequenceOptions opt{.ctx = 32};
    auto trunk_seq = m->new_sequence(opt);
    auto other_seq = other->new_sequence(opt);
    auto seq = blk->new_sequence(opt);
    const std::vector<int32_t> toks = {1, 2, 3};
    std::vector<float> X(toks.size() * size_t(m->info().hidden_size), 0.5f);
    for (model::Sequence* s : {trunk_seq.get(), other_seq.get()}) {
        const model::BatchItem it{s, toks};
        EXPECT_THROW(blk->eval(model::Batch(&it, 1), X.data()), Error);
    }
    std::vector<float> logits(size_t(m->config().n_vocab));
    const model::BatchItem want{seq.get(), toks, model::Logits::Last, logits.data()};
    EXPECT_THROW(blk->eval(model::Batch(&want, 1), X.data()), Error);
    EXPECT_EQ(seq->pos(), 0);
    const model::BatchItem ok{seq.get(), toks};
    blk->eval(model::Batch(&ok, 1), X.data());
    EXPECT_EQ(seq->pos(), 3);
}

}  // namespace
}  // namespace ds4::deepseek4
