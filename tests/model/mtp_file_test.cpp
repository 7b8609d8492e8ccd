// A model file with an embedded MTP head (llama.cpp's layout, ds4-gguf-gen --mtp-embedded) is the
// same trunk: it loads (whole, by layer range, copied), its logits equal those of the file
// without the head bit for bit, and the head's tensors are left to the MTP head; bad nextn
// metadata fails naming the key, and without it the head's block is an unexpected tensor.
#include <gtest/gtest.h>

#include <cstring>
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

struct Files {
    std::string plain, embedded, support;
};

// tiny (6 layers, window 16) with seed 5, without and with the head.
const Files& files() {
    static test::TempDir dir;
    static const Files f = [] {
        Files x;
        const std::vector<std::string> base = {"--preset", "tiny", "--indexer-heads", "16", "--seed", "5"};
        x.plain = test::generate_model(dir, "plain.gguf", base);
        std::vector<std::string> emb = base;
        x.support = dir.file("mtp.gguf");
        emb.insert(emb.end(), {"--mtp-embedded", "--mtp-out", x.support});
        x.embedded = test::generate_model(dir, "embedded.gguf", emb);
        return x;
    }();
    return f;
}

std::vector<int32_t> token_ids(size_t n, uint32_t vocab) {
    std::vector<int32_t> ids(n);
    uint32_t x = 777;
    for (auto& id : ids) {
        x = x * 1103515245u + 12345u;
        id = int32_t((x >> 8) % vocab);
    }
    return ids;
}

std::vector<float> all_logits(Model& m, const std::vector<int32_t>& ids, int64_t chunk) {
    model::Session s(m, {.ctx = int64_t(ids.size()) + 8, .prefill_chunk = chunk});
    std::vector<float> out;
    s.eval(ids, &out, /*all_logits=*/true);
    return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(float) * a.size()) == 0;
}

TEST(MtpFile, EmbeddedHeadLeavesTheTrunkBitIdentical) {
    auto plain = Model::load(files().plain, {.threads = 2});
    auto emb = Model::load(files().embedded, {.threads = 2});
    EXPECT_EQ(emb->config().n_layer, 6u);
    EXPECT_EQ(emb->config().n_nextn, 1u);
    EXPECT_EQ(plain->config().n_nextn, 0u);
    EXPECT_EQ(emb->info().n_layer, 6u);
    EXPECT_EQ(emb->info().hidden_size, plain->info().hidden_size);
    const std::vector<int32_t> ids = token_ids(70, emb->config().n_vocab);  // past the window of 16
    const std::vector<float> want = all_logits(*plain, ids, 32);
    EXPECT_TRUE(same_bits(want, all_logits(*emb, ids, 32)));
    EXPECT_TRUE(same_bits(want, all_logits(*emb, ids, 1)));
    auto copied = Model::load(files().embedded, {.threads = 2, .load = gguf::File::Load::Copy});
    EXPECT_TRUE(same_bits(want, all_logits(*copied, ids, 32)));
    // A range ending with the output loads without the head's block (it is no trunk layer).
    EXPECT_NO_THROW(Model::load(files().embedded, {.layers = "3:output"}));
}

TEST(MtpFile, HeadTensorsValidateInBothLayouts) {
    auto emb = Model::load(files().embedded);
    const ModelConfig& c = emb->config();
    const NextnLayout l = mtp_embedded_layout(c, c.n_layer);
    EXPECT_NO_THROW(validate_specs(emb->file(), c, l.required));
    EXPECT_NO_THROW(validate_specs(emb->file(), c, l.optional, /*required=*/false));
    const auto sup = gguf::File::open(files().support);
    EXPECT_NO_THROW(validate_specs(*sup, c, mtp_support_layout(c)));
    // The support file is not the embedded layout, and vice versa: the checks name the tensor.
    try {
        validate_specs(*sup, c, l.required);
        FAIL() << "the support file passed as the embedded layout";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("blk.6.hc_attn_fn.weight"), std::string::npos) << e.what();
    }
}

// Copies `src` to `dst` with one metadata value replaced.
void copy_with(const std::string& src, const std::string& dst, const std::string& key, gguf::Value v) {
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

std::string load_error(const std::string& path) {
    try {
        Model::load(path);
    } catch (const Error& e) {
        return e.what();
    }
    return "(loaded)";
}

TEST(MtpFile, BadNextnMetadataNamesTheKey) {
    test::TempDir dir;
    const std::string bad = dir.file("bad.gguf");
    copy_with(files().embedded, bad, "deepseek4.nextn_predict_layers", gguf::Value::u32(7));
    std::string msg = load_error(bad);
    EXPECT_NE(msg.find("bad.gguf"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'deepseek4.nextn_predict_layers'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("block_count 7"), std::string::npos) << msg;

    copy_with(files().embedded, bad, "deepseek4.nextn_predict_layers", gguf::Value::f32(1.0f));
    msg = load_error(bad);
    EXPECT_NE(msg.find("'deepseek4.nextn_predict_layers'"), std::string::npos) << msg;

    // With no MTP block declared, blk.6 is a trunk layer of a 7-layer model: its nextn tensors
    // are no trunk tensors; and with block_count 6 the whole block is unexpected.
    copy_with(files().embedded, bad, "deepseek4.nextn_predict_layers", gguf::Value::u32(0));
    msg = load_error(bad);
    EXPECT_NE(msg.find("unexpected tensor blk.6.nextn."), std::string::npos) << msg;
    const std::string bad2 = dir.file("bad2.gguf");
    copy_with(bad, bad2, "deepseek4.block_count", gguf::Value::u32(6));
    msg = load_error(bad2);
    EXPECT_NE(msg.find("unexpected tensor blk.6."), std::string::npos) << msg;
}

}  // namespace
}  // namespace ds4::deepseek4
