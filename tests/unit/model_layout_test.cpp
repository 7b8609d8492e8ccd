// Tensor layout: the Flash layout against the published file's facts (spec/ARCHITECTURE.md §2,
// spec/ORACLE.md: 1328 tensors, 284.3B parameters, 80.8 GiB as q2), general shapes, classes, and
// validate_tensors() on files with one thing wrong.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/deepseek4/layout.h"
#include "support/gguf_test_util.h"

namespace ds4::deepseek4 {
namespace {

std::map<std::string, TensorSpec> by_name(const std::vector<TensorSpec>& v) {
    std::map<std::string, TensorSpec> m;
    for (const auto& s : v) EXPECT_TRUE(m.emplace(s.name, s).second) << "duplicate " << s.name;
    return m;
}

using Ne = std::vector<int64_t>;

TEST(ModelLayout, FlashMatchesThePublishedFile) {
    const ModelConfig c = ModelConfig::flash();
    const auto layout = tensor_layout(c);
    EXPECT_EQ(layout.size(), 1328u);  // spec/ORACLE.md: the published q2 layout has 1328 tensors
    uint64_t params = 0, bytes = 0;
    const TypeRecipe q2 = TypeRecipe::flash_q2();
    for (const auto& s : layout) {
        params += uint64_t(s.n_elements());
        bytes += row_bytes(q2.of(s.cls), s.ne[0]) * uint64_t(s.n_elements() / s.ne[0]);
    }
    // llama.cpp reports the published shape as 284.33 B parameters and 80.76 GiB.
    EXPECT_NEAR(double(params) / 1e9, 284.33, 0.005);
    EXPECT_NEAR(double(bytes) / double(1ull << 30), 80.76, 0.005);

    const auto m = by_name(layout);
    auto ne = [&](const std::string& n) { return m.at(n).ne; };
    // §2.2
    EXPECT_EQ(ne("token_embd.weight"), (Ne{4096, 129280}));
    EXPECT_EQ(ne("output_hc_fn.weight"), (Ne{16384, 4}));
    EXPECT_EQ(ne("output_hc_base.weight"), (Ne{4}));
    EXPECT_EQ(ne("output_hc_scale.weight"), (Ne{1}));
    EXPECT_EQ(ne("output_norm.weight"), (Ne{4096}));
    EXPECT_EQ(ne("output.weight"), (Ne{4096, 129280}));
    // §2.3, a ratio-4 hash layer (2), a ratio-128 layer (3) and a ratio-0 layer (0).
    EXPECT_EQ(ne("blk.2.hc_attn_fn.weight"), (Ne{16384, 24}));
    EXPECT_EQ(ne("blk.2.hc_attn_scale.weight"), (Ne{3}));
    EXPECT_EQ(ne("blk.2.hc_attn_base.weight"), (Ne{24}));
    EXPECT_EQ(ne("blk.2.attn_q_a.weight"), (Ne{4096, 1024}));
    EXPECT_EQ(ne("blk.2.attn_q_b.weight"), (Ne{1024, 32768}));
    EXPECT_EQ(ne("blk.2.attn_kv.weight"), (Ne{4096, 512}));
    EXPECT_EQ(ne("blk.2.attn_kv_a_norm.weight"), (Ne{512}));
    EXPECT_EQ(ne("blk.2.attn_sinks.weight"), (Ne{64}));
    EXPECT_EQ(ne("blk.2.attn_output_a.weight"), (Ne{4096, 8192}));
    EXPECT_EQ(ne("blk.2.attn_output_b.weight"), (Ne{8192, 4096}));
    EXPECT_EQ(ne("blk.2.attn_compressor_ape.weight"), (Ne{1024, 4}));
    EXPECT_EQ(ne("blk.3.attn_compressor_ape.weight"), (Ne{512, 128}));
    EXPECT_EQ(ne("blk.2.attn_compressor_kv.weight"), (Ne{4096, 1024}));
    EXPECT_EQ(ne("blk.3.attn_compressor_gate.weight"), (Ne{4096, 512}));
    EXPECT_EQ(ne("blk.3.attn_compressor_norm.weight"), (Ne{512}));
    EXPECT_EQ(ne("blk.2.indexer.attn_q_b.weight"), (Ne{1024, 8192}));
    EXPECT_EQ(ne("blk.2.indexer.proj.weight"), (Ne{4096, 64}));
    EXPECT_EQ(ne("blk.2.indexer_compressor_ape.weight"), (Ne{256, 4}));
    EXPECT_EQ(ne("blk.2.indexer_compressor_kv.weight"), (Ne{4096, 256}));
    EXPECT_EQ(ne("blk.2.indexer_compressor_norm.weight"), (Ne{128}));
    EXPECT_EQ(ne("blk.2.ffn_gate_inp.weight"), (Ne{4096, 256}));
    EXPECT_EQ(ne("blk.2.ffn_gate_tid2eid.weight"), (Ne{6, 129280}));
    EXPECT_EQ(ne("blk.3.exp_probs_b.bias"), (Ne{256}));
    EXPECT_EQ(ne("blk.2.ffn_gate_exps.weight"), (Ne{4096, 2048, 256}));
    EXPECT_EQ(ne("blk.2.ffn_up_exps.weight"), (Ne{4096, 2048, 256}));
    EXPECT_EQ(ne("blk.2.ffn_down_exps.weight"), (Ne{2048, 4096, 256}));
    EXPECT_EQ(ne("blk.2.ffn_gate_shexp.weight"), (Ne{4096, 2048}));
    EXPECT_EQ(ne("blk.2.ffn_down_shexp.weight"), (Ne{2048, 4096}));

    // Which layers have what (§2.3 "Layers" column).
    for (int i = 0; i < 43; ++i) {
        const std::string b = "blk." + std::to_string(i) + ".";
        const uint32_t r = c.compress_ratios[size_t(i)];
        EXPECT_EQ(m.count(b + "attn_compressor_kv.weight"), r != 0 ? 1u : 0u) << i;
        EXPECT_EQ(m.count(b + "indexer.proj.weight"), r == 4 ? 1u : 0u) << i;
        EXPECT_EQ(m.count(b + "ffn_gate_tid2eid.weight"), i < 3 ? 1u : 0u) << i;
        EXPECT_EQ(m.count(b + "exp_probs_b.bias"), i >= 3 ? 1u : 0u) << i;
        EXPECT_EQ(m.at(b + "attn_norm.weight").layer, i);
    }
    EXPECT_EQ(m.at("output.weight").layer, -1);
    EXPECT_EQ(m.count("blk.43.attn_norm.weight"), 0u);
}

TEST(ModelLayout, ClassesAndTheQ2Recipe) {
    const auto m = by_name(tensor_layout(ModelConfig::flash()));
    const TypeRecipe q2 = TypeRecipe::flash_q2();
    // The dtype column of §2.2-2.3 (q2 file).
    const std::map<std::string, TensorType> published = {
        {"token_embd.weight", TensorType::F16},         {"output_hc_fn.weight", TensorType::F16},
        {"output_hc_base.weight", TensorType::F32},     {"output_hc_scale.weight", TensorType::F32},
        {"output_norm.weight", TensorType::F32},        {"output.weight", TensorType::Q8_0},
        {"blk.2.hc_attn_fn.weight", TensorType::F16},   {"blk.2.hc_attn_scale.weight", TensorType::F32},
        {"blk.2.hc_attn_base.weight", TensorType::F32}, {"blk.2.attn_norm.weight", TensorType::F32},
        {"blk.2.attn_q_a.weight", TensorType::Q8_0},    {"blk.2.attn_q_a_norm.weight", TensorType::F32},
        {"blk.2.attn_q_b.weight", TensorType::Q8_0},    {"blk.2.attn_kv.weight", TensorType::Q8_0},
        {"blk.2.attn_kv_a_norm.weight", TensorType::F32}, {"blk.2.attn_sinks.weight", TensorType::F32},
        {"blk.2.attn_output_a.weight", TensorType::Q8_0}, {"blk.2.attn_output_b.weight", TensorType::Q8_0},
        {"blk.2.attn_compressor_ape.weight", TensorType::F16},
        {"blk.2.attn_compressor_kv.weight", TensorType::F16},
        {"blk.2.attn_compressor_gate.weight", TensorType::F16},
        {"blk.2.attn_compressor_norm.weight", TensorType::F32},
        {"blk.2.indexer.attn_q_b.weight", TensorType::F16}, {"blk.2.indexer.proj.weight", TensorType::F16},
        {"blk.2.indexer_compressor_ape.weight", TensorType::F16},
        {"blk.2.indexer_compressor_kv.weight", TensorType::F16},
        {"blk.2.indexer_compressor_gate.weight", TensorType::F16},
        {"blk.2.indexer_compressor_norm.weight", TensorType::F32},
        {"blk.2.hc_ffn_fn.weight", TensorType::F16},    {"blk.2.ffn_norm.weight", TensorType::F32},
        {"blk.2.ffn_gate_inp.weight", TensorType::F16}, {"blk.3.exp_probs_b.bias", TensorType::F32},
        {"blk.2.ffn_gate_tid2eid.weight", TensorType::I32},
        {"blk.2.ffn_gate_exps.weight", TensorType::IQ2_XXS},
        {"blk.2.ffn_up_exps.weight", TensorType::IQ2_XXS},
        {"blk.2.ffn_down_exps.weight", TensorType::Q2_K},
        {"blk.2.ffn_gate_shexp.weight", TensorType::Q8_0}, {"blk.2.ffn_up_shexp.weight", TensorType::Q8_0},
        {"blk.2.ffn_down_shexp.weight", TensorType::Q8_0},
    };
    for (const auto& [name, type] : published)
        EXPECT_EQ(tensor_type_name(q2.of(m.at(name).cls)), tensor_type_name(type)) << name;

    EXPECT_EQ(m.at("blk.5.attn_q_b.weight").cls, TensorClass::Dense);
    EXPECT_EQ(m.at("blk.5.hc_ffn_fn.weight").cls, TensorClass::Hc);
    EXPECT_EQ(m.at("blk.4.indexer_compressor_gate.weight").cls, TensorClass::Compressor);
    EXPECT_EQ(m.at("blk.4.indexer.proj.weight").cls, TensorClass::Indexer);
    EXPECT_EQ(m.at("blk.5.ffn_gate_inp.weight").cls, TensorClass::Router);
    EXPECT_EQ(m.at("blk.5.ffn_up_exps.weight").cls, TensorClass::GateUpExps);
    EXPECT_EQ(m.at("blk.5.ffn_down_exps.weight").cls, TensorClass::DownExps);
}

TEST(ModelLayout, ClassSelectors) {
    auto all = tensor_classes_from_name("all");
    ASSERT_TRUE(all);
    EXPECT_EQ(all->size(), size_t(kTensorClassCount - 2));
    for (TensorClass c : *all) EXPECT_TRUE(is_selectable(c));
    auto exps = tensor_classes_from_name("exps");
    ASSERT_TRUE(exps);
    EXPECT_EQ(*exps, (std::vector{TensorClass::GateUpExps, TensorClass::DownExps}));
    EXPECT_EQ(*tensor_classes_from_name("down_exps"), std::vector{TensorClass::DownExps});
    EXPECT_EQ(*tensor_classes_from_name("embd"), std::vector{TensorClass::Embd});
    EXPECT_FALSE(tensor_classes_from_name("norm"));  // fixed F32
    EXPECT_FALSE(tensor_classes_from_name("tid2eid"));
    EXPECT_FALSE(tensor_classes_from_name("experts"));
    TypeRecipe r = TypeRecipe::uniform(TensorType::Q8_0);
    EXPECT_EQ(r.of(TensorClass::Norm), TensorType::F32);
    EXPECT_EQ(r.of(TensorClass::Tid2Eid), TensorType::I32);
    EXPECT_THROW(r.set(TensorClass::Norm, TensorType::F16), Error);
}

// A small shape with every per-layer variant (ratios 0, 4, 128; hash and biased routing).
ModelConfig small_config() {
    ModelConfig c = ModelConfig::flash();
    c.set_layer_count(4);
    c.compress_ratios = {0, 4, 128, 4};
    c.n_hash_layers = 2;
    c.n_embd = 64;
    c.n_vocab = 100;
    c.n_head = 6;
    c.head_dim = 48;
    c.rope_dim = 16;
    c.q_lora_rank = 32;
    c.o_lora_rank = 16;
    c.o_groups = 3;
    c.indexer_heads = 2;
    c.indexer_dim = 32;
    c.n_expert = 5;
    c.n_expert_used = 2;
    c.n_expert_shared = 2;
    c.expert_ff = 40;
    c.hc = 3;
    return c;
}

TEST(ModelLayout, GeneralShapesFollowTheConfig) {
    const ModelConfig c = small_config();
    const auto m = by_name(tensor_layout(c));
    auto ne = [&](const std::string& n) { return m.at(n).ne; };
    EXPECT_EQ(ne("blk.0.hc_attn_fn.weight"), (Ne{3 * 64, (2 + 3) * 3}));
    EXPECT_EQ(ne("blk.0.hc_attn_scale.weight"), (Ne{3}));
    EXPECT_EQ(ne("output_hc_fn.weight"), (Ne{192, 3}));
    EXPECT_EQ(ne("blk.0.attn_q_b.weight"), (Ne{32, 6 * 48}));
    EXPECT_EQ(ne("blk.0.attn_output_a.weight"), (Ne{6 * 48 / 3, 3 * 16}));
    EXPECT_EQ(ne("blk.0.attn_output_b.weight"), (Ne{3 * 16, 64}));
    EXPECT_EQ(ne("blk.1.attn_compressor_ape.weight"), (Ne{2 * 48, 4}));
    EXPECT_EQ(ne("blk.2.attn_compressor_ape.weight"), (Ne{48, 128}));
    EXPECT_EQ(ne("blk.1.indexer.attn_q_b.weight"), (Ne{32, 2 * 32}));
    EXPECT_EQ(ne("blk.3.indexer_compressor_kv.weight"), (Ne{64, 64}));
    EXPECT_EQ(ne("blk.1.ffn_gate_tid2eid.weight"), (Ne{2, 100}));
    EXPECT_EQ(ne("blk.2.exp_probs_b.bias"), (Ne{5}));
    EXPECT_EQ(ne("blk.3.ffn_down_exps.weight"), (Ne{40, 64, 5}));
    EXPECT_EQ(ne("blk.3.ffn_up_shexp.weight"), (Ne{64, 80}));  // ff x shared experts
    EXPECT_EQ(ne("blk.3.ffn_down_shexp.weight"), (Ne{80, 64}));
    EXPECT_EQ(m.count("blk.2.indexer.proj.weight"), 0u);
    EXPECT_EQ(m.count("blk.0.attn_compressor_norm.weight"), 0u);
    // File order: token_embd first, output last, layers ascending.
    const auto layout = tensor_layout(c);
    EXPECT_EQ(layout.front().name, "token_embd.weight");
    EXPECT_EQ(layout.back().name, "output.weight");
    int last = -1;
    for (const auto& s : layout)
        if (s.layer >= 0) {
            EXPECT_GE(s.layer, last);
            last = s.layer;
        }
}

// Writes a GGUF with the layout's tensors, letting `edit` change the directory first; data
// are holes (zeros) except tid2eid, filled with `tid_value`.
struct Edit {
    std::string drop;                   // tensor to leave out
    std::string reshape;                // tensor whose ne[0] gets +32
    std::string retype;                 // tensor to store as `type`
    TensorType type = TensorType::F32;
    bool extra = false;                 // add an unknown tensor
    bool hash_bias = false;             // add exp_probs_b on hash layer 0
    int32_t tid_value = 1;
};

std::unique_ptr<gguf::File> write_model(const test::ScratchDir& dir, const ModelConfig& c,
                                        const Edit& e) {
    const std::string path = dir.file("layout.gguf");
    const TypeRecipe types = TypeRecipe::uniform(TensorType::F16);
    gguf::Writer w(path);
    c.write_metadata(w);
    std::vector<std::pair<std::string, uint64_t>> order;
    for (TensorSpec s : tensor_layout(c)) {
        if (s.name == e.drop) continue;
        if (s.name == e.reshape) s.ne[0] += 32;
        TensorType t = s.name == e.retype ? e.type : types.of(s.cls);
        order.emplace_back(s.name, w.add_tensor(s.name, t, s.ne));
    }
    if (e.extra) order.emplace_back("blk.0.mystery.weight", w.add_tensor("blk.0.mystery.weight", TensorType::F32, {8}));
    if (e.hash_bias) order.emplace_back("blk.0.exp_probs_b.bias", w.add_tensor("blk.0.exp_probs_b.bias", TensorType::F32, {int64_t(c.n_expert)}));
    w.begin_data();
    for (const auto& [name, bytes] : order) {
        if (name.find("tid2eid") != std::string::npos) {
            std::vector<int32_t> ids(bytes / 4, e.tid_value);
            w.write_tensor(name, {reinterpret_cast<const uint8_t*>(ids.data()), bytes});
        } else {
            w.skip_tensor(name);
        }
    }
    w.finish();
    return gguf::File::open(path);
}

void expect_invalid(const ModelConfig& c, const Edit& e, std::vector<std::string> fragments) {
    test::ScratchDir dir;
    auto f = write_model(dir, c, e);
    try {
        validate_tensors(*f, c);
        ADD_FAILURE() << "no error; expected one mentioning " << fragments[0];
    } catch (const Error& err) {
        const std::string msg = err.what();
        for (const auto& frag : fragments)
            EXPECT_NE(msg.find(frag), std::string::npos) << "message: " << msg << "\nmissing: " << frag;
    }
}

TEST(ModelLayout, ValidateAcceptsTheLayout) {
    const ModelConfig c = small_config();
    test::ScratchDir dir;
    auto f = write_model(dir, c, {});
    EXPECT_NO_THROW(validate_tensors(*f, c));
    // The same file read back also reproduces the config.
    const ModelConfig r = ModelConfig::from_gguf(*f);
    EXPECT_EQ(r.compress_ratios, c.compress_ratios);
    EXPECT_NO_THROW(validate_tensors(*f, r));
}

TEST(ModelLayout, ValidateAllowsExpProbsBOnHashLayers) {
    const ModelConfig c = small_config();
    test::ScratchDir dir;
    Edit e;
    e.hash_bias = true;
    auto f = write_model(dir, c, e);
    EXPECT_NO_THROW(validate_tensors(*f, c));
}

TEST(ModelLayout, ValidateNamesTheBadTensor) {
    const ModelConfig c = small_config();
    Edit e;
    e.reshape = "blk.3.attn_q_b.weight";
    expect_invalid(c, e, {"tensor blk.3.attn_q_b.weight: shape [64, 288] expected [32, 288]"});
    e = {};
    e.drop = "blk.1.indexer_compressor_norm.weight";
    expect_invalid(c, e, {"tensor blk.1.indexer_compressor_norm.weight missing", "[32]"});
    e = {};
    e.extra = true;
    expect_invalid(c, e, {"unexpected tensor blk.0.mystery.weight"});
    e = {};
    e.retype = "blk.2.attn_norm.weight";
    e.type = TensorType::F16;
    expect_invalid(c, e, {"tensor blk.2.attn_norm.weight", "f16 expected f32"});
    e = {};
    e.retype = "blk.0.ffn_gate_tid2eid.weight";
    e.type = TensorType::F32;
    expect_invalid(c, e, {"blk.0.ffn_gate_tid2eid.weight", "expected i32"});
    e = {};
    e.retype = "blk.1.attn_kv.weight";
    e.type = TensorType::Q5_0;  // valid GGUF type, not one of the engine's weight formats
    expect_invalid(c, e, {"blk.1.attn_kv.weight", "q5_0", "not a weight format"});
    e = {};
    e.tid_value = 5;  // == n_expert
    expect_invalid(c, e, {"blk.0.ffn_gate_tid2eid.weight", "expert id 5", "[0, 5)"});
    e = {};
    e.tid_value = -1;
    expect_invalid(c, e, {"ffn_gate_tid2eid", "expert id -1"});
}

TEST(ModelLayout, ValidateChecksTheConfigTheFileClaims) {
    // A file whose tensors match a 4-layer config does not pass as a 3-layer model.
    const ModelConfig c = small_config();
    test::ScratchDir dir;
    auto f = write_model(dir, c, {});
    ModelConfig fewer = c;
    fewer.set_layer_count(3);
    fewer.compress_ratios = {0, 4, 128};
    EXPECT_THROW(validate_tensors(*f, fewer), Error);
}

}  // namespace
}  // namespace ds4::deepseek4
