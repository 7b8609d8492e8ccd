// The glm-dsa tensor layout (src/model/glm/layout.h): GLM 5.2's shapes as llama.cpp's glm-dsa
// loader creates them, which layers carry what, the type classes, and validate_tensors() on
// files with one thing wrong (each error names the tensor).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/glm/layout.h"
#include "support/gguf_test_util.h"

namespace ds4::glm {
namespace {

using Ne = std::vector<int64_t>;

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& v) {
    std::map<std::string, TensorSpec> m;
    for (const auto& s : v) EXPECT_TRUE(m.emplace(s.name, s).second) << "duplicate " << s.name;
    return m;
}

TEST(GlmLayout, Glm52Shapes) {
    const GlmConfig c = GlmConfig::glm52();
    const auto layout = tensor_layout(c);
    const auto m = by_name(layout);
    auto ne = [&](const std::string& n) { return m.at(n).ne; };
    EXPECT_EQ(ne("token_embd.weight"), (Ne{6144, 154880}));
    EXPECT_EQ(ne("output_norm.weight"), (Ne{6144}));
    EXPECT_EQ(ne("output.weight"), (Ne{6144, 154880}));
    EXPECT_TRUE(m.at("output.weight").optional);  // tied to token_embd when absent
    // Absorbed MLA: the latent row is kv_lora 512 + rope 64; K absorbed per head from 192 nope dims.
    EXPECT_EQ(ne("blk.0.attn_norm.weight"), (Ne{6144}));
    EXPECT_EQ(ne("blk.0.attn_q_a.weight"), (Ne{6144, 2048}));
    EXPECT_EQ(ne("blk.0.attn_q_a_norm.weight"), (Ne{2048}));
    EXPECT_EQ(ne("blk.0.attn_q_b.weight"), (Ne{2048, 64 * 256}));
    EXPECT_EQ(ne("blk.0.attn_kv_a_mqa.weight"), (Ne{6144, 576}));
    EXPECT_EQ(ne("blk.0.attn_kv_a_norm.weight"), (Ne{512}));
    EXPECT_EQ(ne("blk.0.attn_k_b.weight"), (Ne{192, 512, 64}));
    EXPECT_EQ(ne("blk.0.attn_v_b.weight"), (Ne{512, 256, 64}));
    EXPECT_EQ(ne("blk.0.attn_output.weight"), (Ne{64 * 256, 6144}));
    // The lightning indexer: 32 heads x 128, its key LayerNorm with a bias.
    EXPECT_EQ(ne("blk.0.indexer.k_norm.weight"), (Ne{128}));
    EXPECT_EQ(ne("blk.0.indexer.k_norm.bias"), (Ne{128}));
    EXPECT_EQ(ne("blk.0.indexer.proj.weight"), (Ne{6144, 32}));
    EXPECT_EQ(ne("blk.0.indexer.attn_k.weight"), (Ne{6144, 128}));
    EXPECT_EQ(ne("blk.0.indexer.attn_q_b.weight"), (Ne{2048, 32 * 128}));
    // Three dense lead layers, then 256 routed experts + 1 shared.
    EXPECT_EQ(ne("blk.2.ffn_gate.weight"), (Ne{6144, 12288}));
    EXPECT_EQ(ne("blk.2.ffn_down.weight"), (Ne{12288, 6144}));
    EXPECT_EQ(ne("blk.3.ffn_gate_inp.weight"), (Ne{6144, 256}));
    EXPECT_EQ(ne("blk.3.exp_probs_b.bias"), (Ne{256}));
    EXPECT_EQ(ne("blk.3.ffn_gate_exps.weight"), (Ne{6144, 2048, 256}));
    EXPECT_EQ(ne("blk.3.ffn_up_exps.weight"), (Ne{6144, 2048, 256}));
    EXPECT_EQ(ne("blk.3.ffn_down_exps.weight"), (Ne{2048, 6144, 256}));
    EXPECT_EQ(ne("blk.3.ffn_gate_shexp.weight"), (Ne{6144, 2048}));
    EXPECT_EQ(ne("blk.3.ffn_down_shexp.weight"), (Ne{2048, 6144}));

    // Which layers carry what: indexer tensors only on full layers (21), dense FFN on 0..2.
    for (uint32_t il = 0; il < 78; ++il) {
        const std::string p = "blk." + std::to_string(il) + ".";
        EXPECT_EQ(m.count(p + "indexer.proj.weight"), c.indexer_is_full(il) ? 1u : 0u) << il;
        EXPECT_EQ(m.count(p + "ffn_gate.weight"), il < 3 ? 1u : 0u) << il;
        EXPECT_EQ(m.count(p + "ffn_gate_exps.weight"), il < 3 ? 0u : 1u) << il;
    }
    EXPECT_EQ(m.count("blk.78.attn_norm.weight"), 0u);  // the MTP block is mtp_layout's
    // 6 attention matrices + 4 norms per layer, 5 indexer tensors on 21 layers, 3 dense FFN
    // tensors on 3, 8 routed on 75, and 3 global tensors.
    EXPECT_EQ(layout.size(), 78u * 10 + 21u * 5 + 3u * 3 + 75u * 8 + 3);
    uint64_t params = 0;
    for (const auto& s : layout) params += uint64_t(s.n_elements());
    EXPECT_GT(params, uint64_t(700e9));  // GLM 5.2: 744 B (llama.cpp's type 744B_A40B)
    EXPECT_LT(params, uint64_t(760e9));
}

TEST(GlmLayout, MtpBlock) {
    const GlmConfig c = GlmConfig::glm52();
    const auto m = by_name(mtp_layout(c));
    for (const auto& [name, s] : m) {
        EXPECT_EQ(name.rfind("blk.78.", 0), 0u) << name;
        EXPECT_EQ(s.layer, 78) << name;
    }
    EXPECT_EQ(m.at("blk.78.nextn.eh_proj.weight").ne, (Ne{2 * 6144, 6144}));
    EXPECT_EQ(m.at("blk.78.nextn.eh_proj.weight").cls, TensorClass::MtpProj);
    EXPECT_FALSE(m.at("blk.78.nextn.enorm.weight").optional);
    EXPECT_FALSE(m.at("blk.78.nextn.hnorm.weight").optional);
    EXPECT_TRUE(m.at("blk.78.nextn.shared_head_norm.weight").optional);
    EXPECT_TRUE(m.at("blk.78.nextn.embed_tokens.weight").optional);
    EXPECT_TRUE(m.at("blk.78.nextn.shared_head_head.weight").optional);
    // A routed layer whose indexer tensors llama.cpp loads as optional.
    EXPECT_FALSE(m.at("blk.78.ffn_gate_exps.weight").optional);
    EXPECT_FALSE(m.at("blk.78.attn_kv_a_mqa.weight").optional);
    for (const char* n : {"blk.78.indexer.proj.weight", "blk.78.indexer.attn_k.weight", "blk.78.indexer.k_norm.bias"})
        EXPECT_TRUE(m.at(n).optional) << n;
    EXPECT_EQ(m.count("blk.78.ffn_gate.weight"), 0u);
}

TEST(GlmLayout, ClassesAndSelectors) {
    std::set<std::string_view> names;
    for (int i = 0; i < kTensorClassCount; ++i) EXPECT_TRUE(names.insert(tensor_class_name(TensorClass(i))).second);
    for (int i = 0; i < kTensorClassCount; ++i) {
        const auto cls = TensorClass(i);
        const auto sel = tensor_classes_from_name(tensor_class_name(cls));
        if (cls == TensorClass::Norm) {
            EXPECT_FALSE(sel) << "norms are always f32, not selectable";
        } else {
            ASSERT_TRUE(sel) << tensor_class_name(cls);
            EXPECT_EQ(*sel, std::vector<TensorClass>{cls});
        }
    }
    const auto all = tensor_classes_from_name("all");
    ASSERT_TRUE(all);
    EXPECT_EQ(all->size(), size_t(kTensorClassCount - 1));
    EXPECT_EQ(std::count(all->begin(), all->end(), TensorClass::Norm), 0);
    EXPECT_EQ(tensor_classes_from_name("exps"), (std::vector<TensorClass>{TensorClass::GateUpExps, TensorClass::DownExps}));
    EXPECT_FALSE(tensor_classes_from_name("hc"));
    EXPECT_FALSE(tensor_classes_from_name(""));

    // Every F32-only tensor is class Norm and every matrix is not.
    GlmConfig c = GlmConfig::glm52();
    c.set_layer_count(6);
    std::vector<TensorSpec> specs = tensor_layout(c);
    for (TensorSpec& s : mtp_layout(c)) specs.push_back(std::move(s));
    for (const auto& s : specs) {
        const bool vector = s.ne.size() == 1;
        EXPECT_EQ(s.cls == TensorClass::Norm, vector) << s.name;
    }
    const auto m = by_name(specs);
    EXPECT_EQ(m.at("blk.0.attn_k_b.weight").cls, TensorClass::Attn);
    EXPECT_EQ(m.at("blk.0.indexer.proj.weight").cls, TensorClass::IndexerProj);
    EXPECT_EQ(m.at("blk.0.ffn_up.weight").cls, TensorClass::DenseFfn);
    EXPECT_EQ(m.at("blk.4.ffn_up_shexp.weight").cls, TensorClass::Shared);
    EXPECT_EQ(m.at("blk.4.ffn_up_exps.weight").cls, TensorClass::GateUpExps);
    EXPECT_EQ(m.at("blk.4.ffn_down_exps.weight").cls, TensorClass::DownExps);
    EXPECT_EQ(m.at("blk.4.ffn_gate_inp.weight").cls, TensorClass::Router);
    EXPECT_EQ(m.at("token_embd.weight").cls, TensorClass::Embd);
    EXPECT_EQ(m.at("output.weight").cls, TensorClass::Output);
}

// A small config with every kind of layer: 0 dense + full, 1 routed + full, 2 routed + shared.
GlmConfig small() {
    GlmConfig c;
    c.n_layer = 3;
    c.n_nextn = 1;
    c.n_embd = 64;
    c.n_vocab = 100;
    c.n_head = 2;
    c.q_lora_rank = 32;
    c.kv_lora_rank = 32;
    c.rope_dim = 16;
    c.qk_nope_dim = 32;
    c.v_head_dim = 32;
    c.indexer_heads = 2;
    c.indexer_dim = 64;
    c.indexer_top_k = 4;
    c.indexer_full = {1, 1, 0};
    c.n_dense_lead = 1;
    c.dense_ff = 64;
    c.n_expert = 4;
    c.n_expert_used = 2;
    c.expert_ff = 32;
    c.context_length = 256;
    c.validate();
    return c;
}

struct FileTensor {
    std::string name;
    TensorType type;
    Ne ne;
};

// The layout of `c` as tensors (norms F32, the rest F16), edited by `edit`, written as a
// sparse file (validate_tensors reads only the directory).
std::unique_ptr<gguf::File> write(const test::ScratchDir& dir, const GlmConfig& c,
                                  const std::function<void(std::vector<FileTensor>&)>& edit) {
    std::vector<FileTensor> ts;
    std::vector<TensorSpec> specs = tensor_layout(c);
    for (TensorSpec& s : mtp_layout(c))
        if (!s.optional) specs.push_back(std::move(s));
    for (const TensorSpec& s : specs)
        ts.push_back({s.name, s.cls == TensorClass::Norm ? TensorType::F32 : TensorType::F16, s.ne});
    edit(ts);
    const std::string path = dir.file("v.gguf");
    {
        gguf::Writer w(path);
        c.write_metadata(w);
        for (const auto& t : ts) w.add_tensor(t.name, t.type, t.ne);
        w.begin_data();
        for (const auto& t : ts) w.skip_tensor(t.name);
        w.finish();
    }
    return gguf::File::open(path);
}

void expect_invalid(const GlmConfig& c, const std::function<void(std::vector<FileTensor>&)>& edit,
                    const std::vector<std::string>& fragments, const model::LayerRange* range = nullptr) {
    test::ScratchDir dir;
    auto f = write(dir, c, edit);
    try {
        validate_tensors(*f, c, range ? *range : model::LayerRange::all(c.n_layer));
        ADD_FAILURE() << "no error; expected one mentioning " << fragments[0];
    } catch (const Error& e) {
        const std::string msg = e.what();
        for (const auto& frag : fragments)
            EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
    }
}

auto drop(const std::string& name) {
    return [name](std::vector<FileTensor>& ts) {
        ts.erase(std::remove_if(ts.begin(), ts.end(), [&](const FileTensor& t) { return t.name == name; }), ts.end());
    };
}

auto change(const std::string& name, const std::function<void(FileTensor&)>& fn) {
    return [name, fn](std::vector<FileTensor>& ts) {
        for (auto& t : ts)
            if (t.name == name) fn(t);
    };
}

TEST(GlmLayout, ValidateAcceptsTheLayout) {
    const GlmConfig c = small();
    test::ScratchDir dir;
    auto f = write(dir, c, [](std::vector<FileTensor>&) {});
    EXPECT_NO_THROW(validate_tensors(*f, c, model::LayerRange::all(3)));
    EXPECT_NO_THROW(validate_specs(*f, mtp_layout(c)));
    // Optional tensors may be absent: output (tied), exp_probs_b.
    auto g = write(dir, c, [](std::vector<FileTensor>& ts) {
        drop("output.weight")(ts);
        drop("blk.1.exp_probs_b.bias")(ts);
    });
    EXPECT_NO_THROW(validate_tensors(*g, c, model::LayerRange::all(3)));
    // A shared layer may carry (unused) indexer tensors of the right shape.
    auto h = write(dir, c, [&](std::vector<FileTensor>& ts) {
        ts.push_back({"blk.2.indexer.proj.weight", TensorType::F16, {64, 2}});
        ts.push_back({"blk.2.indexer.k_norm.bias", TensorType::F32, {64}});
    });
    EXPECT_NO_THROW(validate_tensors(*h, c, model::LayerRange::all(3)));
}

TEST(GlmLayout, ValidateNamesTheTensor) {
    const GlmConfig c = small();
    expect_invalid(c, drop("blk.1.attn_k_b.weight"),
                   {"v.gguf", "tensor blk.1.attn_k_b.weight missing", "[32, 32, 2]", "class attn"});
    expect_invalid(c, drop("blk.0.indexer.k_norm.bias"), {"blk.0.indexer.k_norm.bias missing"});
    expect_invalid(c, drop("blk.0.ffn_down.weight"), {"blk.0.ffn_down.weight missing", "dense_ffn"});
    expect_invalid(c, change("blk.1.attn_kv_a_mqa.weight", [](FileTensor& t) { t.ne = {64, 32}; }),
                   {"tensor blk.1.attn_kv_a_mqa.weight", "shape [64, 32] expected [64, 48]"});
    expect_invalid(c, change("blk.2.ffn_down_exps.weight", [](FileTensor& t) { t.ne = {32, 64, 3}; }),
                   {"blk.2.ffn_down_exps.weight", "expected [32, 64, 4]"});
    expect_invalid(c, change("blk.1.attn_q_a_norm.weight", [](FileTensor& t) { t.type = TensorType::F16; }),
                   {"tensor blk.1.attn_q_a_norm.weight", "type f16 expected f32"});
    expect_invalid(c, change("blk.1.ffn_gate_inp.weight", [](FileTensor& t) { t.type = TensorType::I32; }),
                   {"tensor blk.1.ffn_gate_inp.weight", "type i32", "not a weight format"});
    expect_invalid(c, [](std::vector<FileTensor>& ts) { ts.push_back({"blk.1.attn_sinks.weight", TensorType::F32, {2}}); },
                   {"unexpected tensor blk.1.attn_sinks.weight", "glm-dsa layout for 3 layers"});
    expect_invalid(c, [](std::vector<FileTensor>& ts) { ts.push_back({"blk.2.indexer.proj.weight", TensorType::F16, {64, 3}}); },
                   {"blk.2.indexer.proj.weight", "expected [64, 2]"});
    // A block past the MTP block is not the drafter's either.
    expect_invalid(c, [](std::vector<FileTensor>& ts) { ts.push_back({"blk.4.attn_norm.weight", TensorType::F32, {64}}); },
                   {"unexpected tensor blk.4.attn_norm.weight"});
}

TEST(GlmLayout, ValidateChecksOnlyTheRange) {
    const GlmConfig c = small();
    // Layers 1:2 without the embedding, with the head: layer 0's tensors may be anything.
    const model::LayerRange tail = model::LayerRange::parse("1:output", 3);
    {
        test::ScratchDir dir;
        auto f = write(dir, c, [](std::vector<FileTensor>& ts) {
            drop("blk.0.attn_q_a.weight")(ts);
            drop("token_embd.weight")(ts);
        });
        EXPECT_NO_THROW(validate_tensors(*f, c, tail));
    }
    expect_invalid(c, drop("blk.2.ffn_up_shexp.weight"), {"blk.2.ffn_up_shexp.weight missing", "needed by layers 1:output"},
                   &tail);
    expect_invalid(c, drop("output_norm.weight"), {"output_norm.weight missing"}, &tail);
    const model::LayerRange head = model::LayerRange::parse("0:1", 3);
    {
        test::ScratchDir dir;
        auto f = write(dir, c, drop("output_norm.weight"));
        EXPECT_NO_THROW(validate_tensors(*f, c, head));
    }
}

}  // namespace
}  // namespace ds4::glm
