// ds4-gguf-gen end to end: runs the built binary (DS4_BIN_DIR) and reads its files back with
// gguf::File, ModelConfig::from_gguf and validate_tensors.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "common/error.h"
#include "gguf/reader.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"
#include "quant/quant.h"
#include "support/gguf_test_util.h"

namespace ds4 {
namespace {

using deepseek4::ModelConfig;
using deepseek4::TensorClass;

const std::string kGen = std::string(DS4_BIN_DIR) + "/ds4-gguf-gen";

struct GenRun {
    int status;
    std::string output;
};

GenRun gen(const std::string& args) {
    const std::string cmd = kGen + " -q " + args + " 2>&1";
    std::FILE* p = popen(cmd.c_str(), "r");
    if (!p) return {-1, "popen failed"};
    std::string out;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
    const int st = pclose(p);
    return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

class GgufGen : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_TRUE(std::filesystem::exists(kGen))
            << kGen << " is missing: build the ds4-gguf-gen target";
    }
    // Generates into the scratch dir; fails the test on a non-zero exit.
    std::string make(const std::string& name, const std::string& args) {
        const std::string path = dir_.file(name);
        const GenRun r = gen("-o " + path + " " + args);
        EXPECT_EQ(r.status, 0) << r.output;
        return path;
    }
    test::ScratchDir dir_;
};

// Dequantized values of a float-valued tensor.
std::vector<float> values(const gguf::File& f, const gguf::TensorInfo& t) {
    std::vector<float> v(size_t(t.n_elements()));
    quant::dequantize_row(t.type, f.data(t), v.data(), t.n_elements());
    return v;
}

struct Stats {
    double mean, rms, std;
    bool finite;
};
Stats stats(const std::vector<float>& v) {
    double s = 0, ss = 0;
    bool finite = true;
    for (float x : v) {
        finite = finite && std::isfinite(x);
        s += x, ss += double(x) * x;
    }
    const double n = double(v.size()), mean = s / n;
    return {mean, std::sqrt(ss / n), std::sqrt(std::max(0.0, ss / n - mean * mean)), finite};
}

std::vector<uint8_t> tensor_bytes(const gguf::File& f, const std::string& name) {
    const auto& t = f.tensor(name);
    return {f.data(t), f.data(t) + t.n_bytes};
}

TEST_F(GgufGen, TinyIsDeterministicAndValid) {
    const std::string a = make("a.gguf", "--seed 7 --threads 1");
    const std::string b = make("b.gguf", "--seed 7 --threads 2");
    ASSERT_EQ(test::read_all(a), test::read_all(b)) << "same seed, different bytes";

    auto f = gguf::File::open(a);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
    EXPECT_EQ(c.n_layer, 6u);
    EXPECT_EQ(c.compress_ratios, (std::vector<uint32_t>{0, 0, 4, 128, 4, 128}));
    EXPECT_EQ(c.n_hash_layers, 3u);
    EXPECT_EQ(c.n_embd, 256u);
    EXPECT_EQ(c.expert_ff, 256u);
    EXPECT_EQ(c.n_vocab, 512u);
    EXPECT_NE(c.head_dim, c.indexer_dim);  // the llama.cpp Hadamard trap (spec/ORACLE.md)
    EXPECT_NE(c.head_dim, 128u);
    EXPECT_GE(c.indexer_dim, 64u);         // smallest Hadamard llama.cpp builds
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "none");
    EXPECT_EQ(f->find("tokenizer.ggml.tokens"), nullptr);
    for (const auto& t : f->tensors())
        EXPECT_EQ(tensor_type_name(t.type),
                  t.name.find("tid2eid") != std::string::npos ? "i32" : "f32")
            << t.name;
    EXPECT_LT(f->file_size(), 64u << 20);
}

TEST_F(GgufGen, DifferentSeedsDiffer) {
    const std::string a = make("a.gguf", "--seed 7");
    const std::string b = make("b.gguf", "--seed 8");
    auto fa = gguf::File::open(a), fb = gguf::File::open(b);
    ASSERT_EQ(fa->tensors().size(), fb->tensors().size());
    for (const auto& t : fa->tensors()) {
        if (t.n_elements() < 16) continue;  // hc scales etc.: too few values to insist
        EXPECT_NE(tensor_bytes(*fa, t.name), tensor_bytes(*fb, t.name)) << t.name;
    }
}

TEST_F(GgufGen, WeightsAreFiniteAndScaled) {
    const std::string path = make("w.gguf", "--seed 3");
    auto f = gguf::File::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    for (const auto& s : deepseek4::tensor_layout(c)) {
        SCOPED_TRACE(s.name);
        const auto& t = f->tensor(s.name);
        if (s.cls == TensorClass::Tid2Eid) {
            // Row per token: n_expert_used distinct ids in [0, n_expert); all experts used.
            const auto* ids = reinterpret_cast<const int32_t*>(f->data(t));
            std::set<int32_t> seen;
            for (int64_t tok = 0; tok < s.ne[1]; ++tok) {
                std::set<int32_t> row(ids + tok * s.ne[0], ids + (tok + 1) * s.ne[0]);
                EXPECT_EQ(row.size(), size_t(s.ne[0])) << "token " << tok;
                seen.insert(row.begin(), row.end());
            }
            EXPECT_EQ(*seen.begin(), 0);
            EXPECT_EQ(*seen.rbegin(), int32_t(c.n_expert) - 1);
            EXPECT_EQ(seen.size(), size_t(c.n_expert));
            continue;
        }
        const Stats st = stats(values(*f, t));
        ASSERT_TRUE(st.finite);
        // The scales weights.h promises: (mean, std) per kind of tensor.
        const std::string& n = s.name;
        auto ends = [&](const char* suf) {
            const std::string x = suf;
            return n.size() >= x.size() && n.compare(n.size() - x.size(), x.size(), x) == 0;
        };
        double mean = 0, sd = 1.0 / std::sqrt(double(s.ne[0]));  // linear: N(0, 1/fan_in)
        if (n == "token_embd.weight") sd = 1;
        else if (ends("norm.weight")) mean = 1, sd = 0.1;
        else if (ends("_scale.weight")) mean = 1, sd = 0.2;
        else if (ends("_base.weight")) sd = 0.5;
        else if (ends("attn_sinks.weight")) sd = 1;
        else if (ends("exp_probs_b.bias") || ends("_ape.weight")) sd = 0.1;
        // Sampling tolerance: 5 standard errors (plus 2% for the std).
        const double count = double(s.n_elements());
        EXPECT_NEAR(st.mean, mean, 5 * sd / std::sqrt(count));
        if (count >= 8) {
            EXPECT_NEAR(st.std, sd, sd * (0.02 + 5 / std::sqrt(2 * count)));
        }
    }
}

TEST_F(GgufGen, QuantTypesPerClassAreAsRequested) {
    // Every class gets its own type; K/IQ rows are 256 wide in tiny for these classes.
    const std::string path = make(
        "q.gguf",
        "--type all=q8_0 --type embd=f16 --type output=bf16 --type hc=q4_k --type router=mxfp4 "
        "--type shared=q2_k --type gate_up_exps=iq2_xxs --type down_exps=q4_k --type indexer=f16 "
        "--type compressor=bf16");
    auto f = gguf::File::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
    const std::map<TensorClass, TensorType> want = {
        {TensorClass::Embd, TensorType::F16},        {TensorClass::Output, TensorType::BF16},
        {TensorClass::Dense, TensorType::Q8_0},      {TensorClass::Shared, TensorType::Q2_K},
        {TensorClass::GateUpExps, TensorType::IQ2_XXS}, {TensorClass::DownExps, TensorType::Q4_K},
        {TensorClass::Hc, TensorType::Q4_K},         {TensorClass::Compressor, TensorType::BF16},
        {TensorClass::Indexer, TensorType::F16},     {TensorClass::Router, TensorType::MXFP4},
        {TensorClass::Norm, TensorType::F32},        {TensorClass::Tid2Eid, TensorType::I32},
    };
    for (const auto& s : deepseek4::tensor_layout(c)) {
        SCOPED_TRACE(s.name);
        const auto& t = f->tensor(s.name);
        EXPECT_EQ(tensor_type_name(t.type), tensor_type_name(want.at(s.cls)));
        if (s.cls == TensorClass::Tid2Eid || s.cls == TensorClass::Norm) continue;
        const Stats st = stats(values(*f, t));
        ASSERT_TRUE(st.finite);
        // Quantized or drawn as random blocks, the weights keep the 1/sqrt(fan_in) scale
        // (except the embedding at 1 and the small ape tables).
        if (s.name.find("_ape.") != std::string::npos) continue;
        const double want_rms = s.cls == TensorClass::Embd ? 1.0 : 1.0 / std::sqrt(double(s.ne[0]));
        EXPECT_NEAR(st.rms, want_rms, 0.2 * want_rms);
        EXPECT_NEAR(st.mean, 0.0, 5 * want_rms / std::sqrt(double(s.n_elements())));
    }
}

// The GLM 5.2 formats: Q4_0 (quantized rows), Q5_K and Q6_K (random blocks, or ggml's
// reference quantizer with --exact-quant), each valid, finite and at the 1/sqrt(fan_in) scale.
TEST_F(GgufGen, GlmFormatsQ4_0Q5_KQ6_K) {
    const std::string shape = "--layers 1 --ratios 4 --experts 2 --experts-used 1 --type dense=q4_0 "
                              "--type shared=q5_k --type gate_up_exps=q5_k --type down_exps=q6_k --seed 7";
    const std::string r = make("r.gguf", shape);
    const std::string e = make("e.gguf", shape + " --exact-quant");
    for (const std::string& path : {r, e}) {
        auto f = gguf::File::open(path);
        const ModelConfig c = ModelConfig::from_gguf(*f);
        EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
        const std::map<std::string, TensorType> want = {
            {"blk.0.attn_q_a.weight", TensorType::Q4_0}, {"blk.0.ffn_up_shexp.weight", TensorType::Q5_K},
            {"blk.0.ffn_up_exps.weight", TensorType::Q5_K}, {"blk.0.ffn_down_exps.weight", TensorType::Q6_K}};
        for (const auto& [name, type] : want) {
            SCOPED_TRACE(path + " " + name);
            const auto& t = f->tensor(name);
            EXPECT_EQ(tensor_type_name(t.type), tensor_type_name(type));
            const Stats st = stats(values(*f, t));
            ASSERT_TRUE(st.finite);
            const double rms = 1.0 / std::sqrt(double(t.ne[0]));
            EXPECT_NEAR(st.rms, rms, 0.1 * rms);
            EXPECT_NEAR(st.mean, 0.0, 5 * rms / std::sqrt(double(t.n_elements())));
        }
    }
    auto fr = gguf::File::open(r), fe = gguf::File::open(e);
    EXPECT_NE(tensor_bytes(*fr, "blk.0.ffn_down_exps.weight"), tensor_bytes(*fe, "blk.0.ffn_down_exps.weight"));
    // Q4_0 has no random blocks: both runs quantize the same rows.
    EXPECT_EQ(tensor_bytes(*fr, "blk.0.attn_q_a.weight"), tensor_bytes(*fe, "blk.0.attn_q_a.weight"));
}

TEST_F(GgufGen, ExactQuantizationPath) {
    // The reference quantizers (IQ2_XXS with all-ones importance) on a model small enough
    // for them; deterministic as well.
    const std::string args =
        "--layers 1 --ratios 4 --experts 2 --experts-used 1 --type gate_up_exps=iq2_xxs "
        "--type down_exps=q2_k --exact-quant --seed 5";
    const std::string a = make("a.gguf", args + " --threads 2");
    const std::string b = make("b.gguf", args + " --threads 1");
    EXPECT_EQ(test::read_all(a), test::read_all(b));
    const std::string r = make("r.gguf", "--layers 1 --ratios 4 --experts 2 --experts-used 1 "
                                         "--type gate_up_exps=iq2_xxs --type down_exps=q2_k --seed 5");
    auto fa = gguf::File::open(a), fr = gguf::File::open(r);
    for (const char* name : {"blk.0.ffn_up_exps.weight", "blk.0.ffn_down_exps.weight"}) {
        SCOPED_TRACE(name);
        EXPECT_NE(tensor_bytes(*fa, name), tensor_bytes(*fr, name));  // the two paths differ
        const Stats st = stats(values(*fa, fa->tensor(name)));
        ASSERT_TRUE(st.finite);
        const double want = 1.0 / 16.0;  // fan_in 256
        EXPECT_NEAR(st.rms, want, 0.25 * want);  // 2-bit codes lose some energy
    }
}

TEST_F(GgufGen, SparseFlashHasTheRealSizeAndNoData) {
    const std::string path = make("flash.gguf", "--preset flash --sparse");
    struct stat sb {};
    ASSERT_EQ(stat(path.c_str(), &sb), 0);
    // spec/ORACLE.md: the published q2 layout loads as 80.8 GiB.
    EXPECT_NEAR(double(sb.st_size) / double(1ull << 30), 80.76, 0.01);
    EXPECT_LT(uint64_t(sb.st_blocks) * 512, 64ull << 20) << "not sparse";
    auto f = gguf::File::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_EQ(c.n_layer, 43u);
    EXPECT_EQ(c.compress_ratios, ModelConfig::flash().compress_ratios);
    EXPECT_EQ(c.n_vocab, 129280u);
    EXPECT_EQ(f->tensors().size(), 1328u);
    EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
    const deepseek4::TypeRecipe q2 = deepseek4::TypeRecipe::flash_q2();
    for (const auto& s : deepseek4::tensor_layout(c))
        EXPECT_EQ(f->tensor(s.name).type, q2.of(s.cls)) << s.name;
}

TEST_F(GgufGen, SparsePro_HasTheRealShapeAndNoData) {
    // spec/ARCHITECTURE.md §1.3: the full 61-layer PRO file, holes instead of data.
    const std::string path = make("pro.gguf", "--preset pro --sparse");
    struct stat sb {};
    ASSERT_EQ(stat(path.c_str(), &sb), 0);
    EXPECT_NEAR(double(sb.st_size) / double(1ull << 30), 432.71, 0.01);  // ds4-gguf-gen --help states it
    EXPECT_LT(uint64_t(sb.st_blocks) * 512, 64ull << 20) << "not sparse";
    auto f = gguf::File::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_EQ(c.n_layer, 61u);
    EXPECT_EQ(c.compress_ratios, ModelConfig::pro().compress_ratios);
    EXPECT_EQ(c.n_expert, 384u);
    EXPECT_FLOAT_EQ(c.expert_weights_scale, 2.5f);
    EXPECT_EQ(f->tensor("blk.0.ffn_gate_exps.weight").shape_string(), "[7168, 3072, 384]");
    EXPECT_EQ(f->tensor("blk.60.ffn_down_exps.weight").shape_string(), "[3072, 7168, 384]");
    EXPECT_EQ(f->tensor("blk.0.attn_q_b.weight").shape_string(), "[1536, 65536]");
    EXPECT_EQ(f->tensor("blk.0.attn_output_b.weight").shape_string(), "[16384, 7168]");
    EXPECT_EQ(f->tensor("blk.0.hc_attn_fn.weight").shape_string(), "[28672, 24]");
    // Layers 0 and 1 are ratio 128: a compressor but no indexer; layer 2 has both.
    EXPECT_NO_THROW(f->tensor("blk.0.attn_compressor_ape.weight"));
    EXPECT_EQ(f->find_tensor("blk.0.indexer.proj.weight"), nullptr);
    EXPECT_NE(f->find_tensor("blk.2.indexer.proj.weight"), nullptr);
    EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
}

TEST_F(GgufGen, ProLayersKeepThePatternAndTheWidths) {
    const std::string path = make("p4.gguf", "--preset pro --sparse --layers 4");
    auto f = gguf::File::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_EQ(c.compress_ratios, (std::vector<uint32_t>{128, 128, 4, 128}));
    EXPECT_EQ(c.n_hash_layers, 3u);
    EXPECT_EQ(c.indexer_top_k, 1024u);
    EXPECT_EQ(f->tensor("blk.2.ffn_gate_tid2eid.weight").shape_string(), "[6, 129280]");
    EXPECT_EQ(f->tensor("blk.3.exp_probs_b.bias").shape_string(), "[384]");
    EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
}

TEST_F(GgufGen, FlashShapeIsTheRealPerLayerShape) {
    // --preset flash with small overrides: the real per-layer dims are kept (sparse, so the
    // test writes no data).
    const std::string path = make("f2.gguf", "--preset flash --sparse --ratios 4,128,4,128");
    auto f = gguf::File::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_EQ(c.n_layer, 4u);
    EXPECT_EQ(c.compress_ratios, (std::vector<uint32_t>{4, 128, 4, 128}));
    EXPECT_EQ(c.n_hash_layers, 3u);
    EXPECT_EQ(f->tensor("blk.0.ffn_gate_exps.weight").shape_string(), "[4096, 2048, 256]");
    EXPECT_EQ(f->tensor("blk.1.attn_compressor_ape.weight").shape_string(), "[512, 128]");
    EXPECT_EQ(f->tensor("blk.3.exp_probs_b.bias").shape_string(), "[256]");
    EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
}

TEST_F(GgufGen, OverridesChangeTheShape) {
    const std::string path = make(
        "o.gguf",
        "--layers 3 --ratios 128,0,4 --hash-layers 1 --embd 64 --vocab 300 --heads 6 --head-dim 48 "
        "--rope-dim 8 --q-rank 32 --o-rank 16 --o-groups 3 --experts 5 --experts-used 3 "
        "--shared-experts 2 --ff 32 --indexer-heads 3 --indexer-dim 64 --indexer-top-k 9 "
        "--window 7 --hc 2 --ctx 777");
    auto f = gguf::File::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
    EXPECT_EQ(c.compress_ratios, (std::vector<uint32_t>{128, 0, 4}));
    EXPECT_EQ(c.n_hash_layers, 1u);
    EXPECT_EQ(c.n_embd, 64u);
    EXPECT_EQ(c.n_vocab, 300u);
    EXPECT_EQ(c.n_head, 6u);
    EXPECT_EQ(c.head_dim, 48u);
    EXPECT_EQ(c.rope_dim, 8u);
    EXPECT_EQ(c.q_lora_rank, 32u);
    EXPECT_EQ(c.o_lora_rank, 16u);
    EXPECT_EQ(c.o_groups, 3u);
    EXPECT_EQ(c.n_expert, 5u);
    EXPECT_EQ(c.n_expert_used, 3u);
    EXPECT_EQ(c.n_expert_shared, 2u);
    EXPECT_EQ(c.expert_ff, 32u);
    EXPECT_EQ(c.indexer_heads, 3u);
    EXPECT_EQ(c.indexer_dim, 64u);
    EXPECT_EQ(c.indexer_top_k, 9u);
    EXPECT_EQ(c.window, 7u);
    EXPECT_EQ(c.hc, 2u);
    EXPECT_EQ(c.context_length, 777u);
}

TEST_F(GgufGen, BadRequestsFailWithAClearMessage) {
    struct Case {
        std::string args, fragment;
    };
    const std::vector<Case> cases = {
        {"--type dense=q4_k", "blk.0.attn_q_b.weight has rows of 64 values"},
        {"--ratios 0,3", "only 0, 4 and 128"},
        {"--layers 4 --ratios 0,4", "--ratios has 2 entries but --layers is 4"},
        {"--heads 3 --o-groups 2", "output_group_count"},
        {"--rope-dim 7", "rope.dimension_count"},
        {"--experts-used 9", "expert_used_count"},
        {"--hash-layers 7", "hash_layer_count"},
        {"--indexer-dim 48", "power of two"},
        {"--type foo=f16", "unknown class 'foo'"},
        {"--type exps=q5_0", "unsupported type 'q5_0'"},
        {"--type norm=f16", "unknown class 'norm'"},
        {"--type exps", "CLASS=TYPE"},
        {"--preset huge", "unknown preset 'huge'"},
        {"--real-vocab --vocab 1000", "--vocab >= 128829"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.args);
        const std::string path = dir_.file("bad.gguf");
        const GenRun r = gen("-o " + path + " " + c.args);
        EXPECT_NE(r.status, 0);
        EXPECT_NE(r.output.find(c.fragment), std::string::npos) << r.output;
        EXPECT_FALSE(std::filesystem::exists(path));
    }
}

// --dspark-out: a DSpark support file in upstream's layout (docs/SPECULATIVE.md, "DSpark") for
// the generated trunk, beside an unchanged trunk file.
TEST_F(GgufGen, DsparkSupportFileMatchesTheTrunk) {
    const std::string plain = make("plain.gguf", "--seed 5");
    const std::string dspark = dir_.file("dspark.gguf");
    const std::string trunk = make("trunk.gguf", "--seed 5 --dspark-out " + dspark);
    EXPECT_EQ(test::read_all(plain), test::read_all(trunk)) << "--dspark-out changed the trunk";
    const ModelConfig c = ModelConfig::from_gguf(*gguf::File::open(trunk));
    auto f = gguf::File::open(dspark);

    // Metadata as upstream's converter writes it; target layers are the trunk's last three.
    EXPECT_EQ(f->get_string("general.architecture"), "deepseek4-dspark");
    EXPECT_EQ(f->get_u32("dspark.block_size"), 5u);
    EXPECT_EQ(f->get_u32("dspark.stage_count"), 3u);
    EXPECT_EQ(f->get_u32("dspark.n_layers"), 3u);
    const uint32_t R = f->get_u32("dspark.markov_rank");
    EXPECT_EQ(R, 32u);  // tiny: f32 dense, the smallest rank the generator picks
    EXPECT_EQ(f->get_u32("dspark.noise_token_id"), c.n_vocab - 1);
    const gguf::Value* tl = f->find("dspark.target_layer_ids");
    ASSERT_NE(tl, nullptr);
    ASSERT_TRUE(tl->is_array());
    EXPECT_EQ(tl->elem_type, gguf::ValueType::UINT32);
    ASSERT_EQ(tl->elems.size(), 3u);
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(tl->elem_int(i), int64_t(c.n_layer - 3 + i));

    // Every stage is a ratio-0 top-k block held to the trunk's layer checks.
    for (int s = 0; s < 3; ++s)
        EXPECT_NO_THROW(deepseek4::validate_layer_tensors(*f, c, fmt::format("mtp.{}.", s),
                                                          {.ratio = 0, .hash = false}, -1));
    const int64_t D = c.n_embd, V = c.n_vocab, HC = c.hc;
    const std::map<std::string, std::vector<int64_t>> heads = {
        {"mtp.0.main_proj.weight", {3 * D, D}},
        {"mtp.0.main_norm.weight", {D}},
        {"mtp.2.norm.weight", {D}},
        {"mtp.2.hc_head_fn.weight", {HC * D, HC}},
        {"mtp.2.hc_head_base.weight", {HC}},
        {"mtp.2.hc_head_scale.weight", {1}},
        {"mtp.2.markov_head.markov_w1.weight", {R, V}},
        {"mtp.2.markov_head.markov_w2.weight", {R, V}},
        {"mtp.2.confidence_head.proj.weight", {D + R, 1}},
    };
    const size_t block = deepseek4::layer_tensor_layout(c, "x.", 0, {.ratio = 0, .hash = false}).size();
    EXPECT_EQ(f->tensors().size(), 3 * block + heads.size());
    std::vector<std::string> names;
    for (const auto& t : f->tensors()) {
        names.push_back(t.name);
        EXPECT_EQ(t.name.rfind("mtp.", 0), 0u) << t.name;
        EXPECT_EQ(tensor_type_name(t.type), "f32") << t.name;
    }
    EXPECT_TRUE(std::is_sorted(names.begin(), names.end()));
    for (const auto& [name, ne] : heads) {
        SCOPED_TRACE(name);
        const auto& t = f->tensor(name);
        EXPECT_EQ(std::vector<int64_t>(t.ne.begin(), t.ne.begin() + t.n_dims), ne);
    }
    // Scales: markov_w1 is a per-token table (unit RMS), the confidence row 1/sqrt(fan_in).
    EXPECT_NEAR(stats(values(*f, f->tensor("mtp.2.markov_head.markov_w1.weight"))).rms, 1.0, 0.05);
    EXPECT_NEAR(stats(values(*f, f->tensor("mtp.2.markov_head.markov_w2.weight"))).rms,
                1.0 / std::sqrt(double(R)), 0.05 / std::sqrt(double(R)));
    EXPECT_NEAR(stats(values(*f, f->tensor("mtp.0.main_norm.weight"))).mean, 1.0, 0.05);
    // Its own random streams: an MTP file's mtp.0.* of the same seed must not repeat them.
    EXPECT_NE(tensor_bytes(*f, "mtp.0.attn_q_a.weight"),
              tensor_bytes(*gguf::File::open(trunk), "blk.0.attn_q_a.weight"));
}

TEST_F(GgufGen, DsparkSupportFileTakesTheRecipe) {
    const std::string dspark = dir_.file("dspark.gguf");
    make("trunk.gguf", "--type all=q8_0 --type hc=f16 --type exps=q2_k --dspark-out " + dspark);
    auto f = gguf::File::open(dspark);
    EXPECT_EQ(f->get_u32("dspark.markov_rank"), 32u);
    const std::map<std::string, std::string> want = {
        {"mtp.0.main_proj.weight", "q8_0"},
        {"mtp.2.markov_head.markov_w1.weight", "q8_0"},
        {"mtp.2.confidence_head.proj.weight", "q8_0"},
        {"mtp.2.hc_head_fn.weight", "f16"},
        {"mtp.1.hc_attn_fn.weight", "f16"},
        {"mtp.1.ffn_gate_exps.weight", "q2_K"},
        {"mtp.1.ffn_gate_shexp.weight", "q8_0"},
        {"mtp.2.hc_head_scale.weight", "f32"},
        {"mtp.0.main_norm.weight", "f32"},
    };
    for (const auto& [name, type] : want) EXPECT_EQ(tensor_type_name(f->tensor(name).type), type) << name;
    // A dense type with 256-value blocks takes a Markov rank of one block.
    make("k.gguf", "--type dense=q2_k --embd 256 --q-rank 256 --o-rank 256 --heads 2 --head-dim 128 "
                   "--rope-dim 64 --indexer-dim 64 --o-groups 1 --dspark-out " + dir_.file("k_dspark.gguf"));
    EXPECT_EQ(gguf::File::open(dir_.file("k_dspark.gguf"))->get_u32("dspark.markov_rank"), 256u);
}

// The tokenizer.json of the oracle cache (scripts/setup.sh); empty when absent.
std::string tokenizer_json() {
    const std::filesystem::path p = std::filesystem::path(DS4_SOURCE_DIR) / ".cache" /
                                    "oracle" / "tokenizer" / "models" / "tokenizer.json";
    return std::filesystem::exists(p) ? p.string() : std::string();
}

// Issue 22 item 11: the output was written through the fixed name OUT.tmp, following a symlink
// planted there and overwriting its target. Now the temporary has a random name, is created
// with O_EXCL and is renamed into place: the planted link and its target are left alone.
TEST_F(GgufGen, PlantedSymlinkAtTheOldTemporaryNameIsNotFollowed) {
    const std::string out = dir_.file("model.gguf"), victim = dir_.file("victim.txt");
    test::write_all(victim, {'k', 'e', 'e', 'p'});
    std::filesystem::create_symlink(victim, out + ".tmp");
    const std::string path = make("model.gguf", "--preset tiny --seed 2");
    EXPECT_EQ(test::read_all(victim), (std::vector<uint8_t>{'k', 'e', 'e', 'p'}));
    EXPECT_TRUE(std::filesystem::is_symlink(out + ".tmp"));
    EXPECT_NO_THROW(ModelConfig::from_gguf(*gguf::File::open(path)));
    // Nothing else was left in the directory.
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(std::filesystem::path(out).parent_path()))
        names.insert(e.path().filename().string());
    EXPECT_EQ(names, (std::set<std::string>{"model.gguf", "model.gguf.tmp", "victim.txt"}));
}

TEST_F(GgufGen, RealVocabularyInV4Layout) {
    const std::string tj = tokenizer_json();
    if (tj.empty()) GTEST_SKIP() << "no tokenizer.json: run scripts/setup.sh";
    const std::string path =
        make("rv.gguf", "--real-vocab --tokenizer-json " + tj +
                            " --embd 64 --layers 2 --ratios 0,4 --experts 4 --ff 64 "
                            "--type embd=f16 --type output=f16");
    auto f = gguf::File::open(path);
    const ModelConfig c = ModelConfig::from_gguf(*f);
    EXPECT_EQ(c.n_vocab, 129280u);
    EXPECT_NO_THROW(deepseek4::validate_tensors(*f, c));
    EXPECT_EQ(f->get_string("tokenizer.ggml.model"), "gpt2");
    EXPECT_EQ(f->get_string("tokenizer.ggml.pre"), "joyai-llm");
    EXPECT_EQ(f->get_u32("tokenizer.ggml.bos_token_id"), 0u);
    EXPECT_EQ(f->get_u32("tokenizer.ggml.eos_token_id"), 1u);
    EXPECT_FALSE(f->get_bool("tokenizer.ggml.add_bos_token"));
    const gguf::Value* tokens = f->find("tokenizer.ggml.tokens");
    const gguf::Value* types = f->find("tokenizer.ggml.token_type");
    const gguf::Value* merges = f->find("tokenizer.ggml.merges");
    ASSERT_TRUE(tokens && types && merges);
    ASSERT_EQ(tokens->elems.size(), 129280u);
    ASSERT_EQ(types->elems.size(), 129280u);
    EXPECT_EQ(merges->elems.size(), 127741u);  // spec/TOKENIZER_CHAT.md §1.1
    auto tok = [&](size_t id) { return std::get<std::string>(tokens->elems[id]); };
    auto type = [&](size_t id) { return *types->elem_int(id); };
    // spec/TOKENIZER_CHAT.md §1.1-1.2: ids and the llama.cpp token types.
    EXPECT_EQ(tok(0), "<\xef\xbd\x9c" "begin\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>");
    EXPECT_EQ(tok(1), "<\xef\xbd\x9c" "end\xe2\x96\x81of\xe2\x96\x81sentence\xef\xbd\x9c>");
    EXPECT_EQ(tok(3), "!");
    EXPECT_EQ(tok(223), "\xc4\xa0");  // Ġ (space)
    EXPECT_EQ(tok(201), "\xc4\x8a");  // Ċ (LF)
    EXPECT_EQ(tok(128803), "<\xef\xbd\x9cUser\xef\xbd\x9c>");
    EXPECT_EQ(tok(128804), "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>");
    EXPECT_EQ(tok(128821), "<think>");
    EXPECT_EQ(tok(128822), "</think>");
    EXPECT_EQ(tok(128825), "\xef\xbd\x9c" "DSML\xef\xbd\x9c");
    EXPECT_EQ(tok(128828), "<\xef\xbd\x9c" "latest_reminder\xef\xbd\x9c>");
    EXPECT_EQ(tok(129279), "[PAD129279]");
    EXPECT_EQ(type(0), 3);       // CONTROL
    EXPECT_EQ(type(1), 3);
    EXPECT_EQ(type(223), 1);     // NORMAL
    EXPECT_EQ(type(128803), 3);  // looks like <｜…｜>
    EXPECT_EQ(type(128821), 4);  // USER_DEFINED
    EXPECT_EQ(type(128825), 4);
    EXPECT_EQ(type(128828), 3);
    EXPECT_EQ(type(128815), 5);  // UNUSED
    EXPECT_EQ(type(129279), 5);
    EXPECT_EQ(std::get<std::string>(merges->elems[0]), "\xc4\xa0 t");  // "Ġ t"
    // §1.1 invariant: merge rank r produces token 259 + r.
    for (size_t r : {size_t(0), size_t(1000), size_t(127740)}) {
        std::string m = std::get<std::string>(merges->elems[r]);
        m.erase(m.find(' '), 1);
        EXPECT_EQ(tok(259 + r), m) << "merge " << r;
    }
}

}  // namespace
}  // namespace ds4
