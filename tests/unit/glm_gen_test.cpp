// ds4-gguf-gen --arch glm-dsa end to end: runs the built binary (DS4_BIN_DIR) and reads its files
// back with gguf::File, glm::GlmConfig::from_gguf, glm::validate_tensors and the tokenizer, for
// several shapes and type mixes, the sparse full GLM 5.2 layout, the MTP block, the weight
// scales and the errors.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "model/glm/config.h"
#include "model/glm/layout.h"
#include "quant/quant.h"
#include "support/gguf_test_util.h"
#include "support/tool_run.h"
#include "tokenizer/tokenizer.h"

namespace ds4::glm {
namespace {

const std::string kGen = std::string(DS4_BIN_DIR) + "/ds4-gguf-gen";

class GlmGen : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(std::filesystem::exists(kGen)) << kGen << " is missing"; }

    // ds4-gguf-gen --arch glm-dsa ARGS (split by the shell): exit status and output.
    test::RunResult run(const std::string& args) const {
        return test::run_command({"/bin/sh", "-c", kGen + " --arch glm-dsa " + args + " 2>&1"});
    }
    // Generates `name` quietly; fails the test on a non-zero exit.
    std::string make(const std::string& name, const std::string& args) {
        const std::string path = dir_.file(name);
        const test::RunResult r = run("-q -o " + path + " " + args);
        EXPECT_EQ(r.exit_code, 0) << r.output;
        return path;
    }
    // Expects the generator to fail with every fragment in its output.
    void expect_error(const std::string& args, const std::vector<std::string>& fragments) {
        const test::RunResult r = run("-q -o " + dir_.file("bad.gguf") + " " + args);
        EXPECT_NE(r.exit_code, 0) << args;
        for (const auto& f : fragments)
            EXPECT_NE(r.output.find(f), std::string::npos) << args << "\noutput: " << r.output << "\nmissing: " << f;
        EXPECT_FALSE(std::filesystem::exists(dir_.file("bad.gguf"))) << "a failed run left a file";
    }
    test::ScratchDir dir_;
};

// Opens a generated file and checks what every glm-dsa file must pass: the config reads back
// and the whole trunk's tensors match the layout.
GlmConfig open_valid(const std::string& path, std::unique_ptr<gguf::File>& f) {
    f = gguf::File::open(path);
    const GlmConfig c = GlmConfig::from_gguf(*f);
    validate_tensors(*f, c, model::LayerRange::all(c.n_layer));
    return c;
}

std::vector<float> values(const gguf::File& f, const std::string& name) {
    const gguf::TensorInfo& t = f.tensor(name);
    std::vector<float> v(size_t(t.n_elements()));
    quant::dequantize_row(t.type, f.data(t), v.data(), t.n_elements());
    return v;
}

struct Stats {
    double mean, rms, std;
};
Stats stats(const std::vector<float>& v) {
    double s = 0, ss = 0;
    for (float x : v) s += x, ss += double(x) * x;
    const double n = double(v.size()), mean = s / n;
    return {mean, std::sqrt(ss / n), std::sqrt(std::max(0.0, ss / n - mean * mean))};
}

std::string type_of(const gguf::File& f, const std::string& name) {
    return std::string(tensor_type_name(f.tensor(name).type));
}

TEST_F(GlmGen, TinyHasEveryFeatureAndIsDeterministic) {
    const std::string a = make("a.gguf", "--seed 7 --threads 1");
    const std::string b = make("b.gguf", "--seed 7 --threads 2");
    EXPECT_EQ(test::read_all(a), test::read_all(b)) << "same seed, different bytes";

    std::unique_ptr<gguf::File> f;
    const GlmConfig c = open_valid(a, f);
    EXPECT_EQ(*f->find("general.architecture")->as_string(), "glm-dsa");
    EXPECT_EQ(c.n_layer, 5u);
    EXPECT_EQ(c.n_nextn, 0u);
    EXPECT_EQ(c.n_dense_lead, 1u);
    EXPECT_EQ(c.indexer_full, (std::vector<uint8_t>{1, 1, 0, 1, 0}));
    EXPECT_EQ(c.n_vocab, 512u);
    EXPECT_EQ(c.indexer_top_k, 8u);
    EXPECT_EQ(c.layer_norm_eps, 1e-6f);  // the config's default unless --indexer-ln-eps
    // What llama.cpp needs to run it (the oracle): a 64 x 2^k indexer head, and a latent KV
    // row of another width (else llama.cpp rotates the main KV too).
    EXPECT_EQ(c.indexer_dim, 64u);
    EXPECT_NE(c.key_dim(), c.indexer_dim);
    EXPECT_LE(c.rope_dim, c.indexer_dim);
    // A dense lead layer, routed layers, full and shared indexer layers.
    EXPECT_NE(f->find_tensor("blk.0.ffn_gate.weight"), nullptr);
    EXPECT_EQ(f->find_tensor("blk.0.ffn_gate_inp.weight"), nullptr);
    EXPECT_NE(f->find_tensor("blk.1.ffn_gate_exps.weight"), nullptr);
    EXPECT_NE(f->find_tensor("blk.1.exp_probs_b.bias"), nullptr);
    EXPECT_NE(f->find_tensor("blk.3.indexer.proj.weight"), nullptr);
    EXPECT_EQ(f->find_tensor("blk.2.indexer.proj.weight"), nullptr);
    EXPECT_EQ(f->find_tensor("blk.4.indexer.attn_k.weight"), nullptr);
    EXPECT_NE(f->find_tensor("output.weight"), nullptr);
    for (const auto& t : f->tensors()) EXPECT_EQ(tensor_type_name(t.type), "f32") << t.name;
    EXPECT_EQ(f->tensors().size(), tensor_layout(c).size());
    EXPECT_LT(f->file_size(), 32u << 20);

    const std::string other = make("c.gguf", "--seed 8");
    EXPECT_NE(test::read_all(a), test::read_all(other)) << "different seeds, same bytes";
}

// The glm4 vocabulary: loads in our tokenizer, GLM's added tokens in the last 60 ids as
// CONTROL tokens, the special ids llama.cpp's GLM converter sets.
TEST_F(GlmGen, TokenizerIsGlm4Style) {
    const std::string path = make("t.gguf", "");
    auto f = gguf::File::open(path);
    EXPECT_EQ(*f->find("tokenizer.ggml.model")->as_string(), "gpt2");
    EXPECT_EQ(*f->find("tokenizer.ggml.pre")->as_string(), "glm4");
    const auto tok = tokenizer::Tokenizer::from_gguf(*f);
    ASSERT_EQ(tok->n_vocab(), 512);
    const int32_t base = 512 - 60;
    EXPECT_EQ(tok->find("<|endoftext|>"), base);
    EXPECT_EQ(tok->find("[gMASK]"), base + 2);
    EXPECT_EQ(tok->find("<sop>"), base + 4);
    EXPECT_EQ(tok->find("<|user|>"), base + 7);
    EXPECT_EQ(tok->find("<|observation|>"), base + 9);
    EXPECT_EQ(tok->find("<think>"), base + 21);
    EXPECT_EQ(tok->find("</arg_value>"), base + 30);
    for (const char* m : {"[gMASK]", "<sop>", "<|system|>", "<|assistant|>", "</think>", "<tool_call>",
                          "</tool_call>", "<tool_response>", "<arg_key>", "<arg_value>"})
        EXPECT_EQ(tok->token_type(tok->find(m)), tokenizer::TokenType::Control) << m;
    EXPECT_EQ(tok->special().bos, base + 2);
    EXPECT_EQ(tok->special().eos, base);
    EXPECT_EQ(tok->special().unk, base);
    EXPECT_EQ(tok->special().pad, base);
    EXPECT_EQ(*f->find("tokenizer.ggml.eot_token_id")->as_uint(), uint64_t(base + 7));
    EXPECT_EQ(*f->find("tokenizer.ggml.eom_token_id")->as_uint(), uint64_t(base + 9));

    // Markers match as their ids in trusted text; plain text goes through the merges.
    const auto ids = tok->encode("[gMASK]<sop><|user|> the thinking<think>", tokenizer::Special::Match);
    ASSERT_GE(ids.size(), 5u);
    EXPECT_EQ(ids[0], base + 2);
    EXPECT_EQ(ids[1], base + 4);
    EXPECT_EQ(ids[2], base + 7);
    EXPECT_EQ(ids.back(), base + 21);
    EXPECT_EQ(tok->encode(" the").size(), 1u);  // merged
    EXPECT_EQ(tok->decode(ids), "[gMASK]<sop><|user|> the thinking<think>");

    // With GLM 5's vocabulary size the added tokens sit at their published ids.
    const std::string big = make("big.gguf", "--vocab 154880 --embd 32 --type embd=q8_0 --type output=q8_0");
    auto fb = gguf::File::open(big);
    const auto tb = tokenizer::Tokenizer::from_gguf(*fb);
    EXPECT_EQ(tb->find("<|endoftext|>"), 154820);
    EXPECT_EQ(tb->find("[gMASK]"), 154822);
    EXPECT_EQ(tb->find("<sop>"), 154824);
    EXPECT_EQ(tb->find("<|system|>"), 154826);
    EXPECT_EQ(tb->find("<|observation|>"), 154829);
    EXPECT_EQ(tb->find("<think>"), 154841);
    EXPECT_EQ(tb->find("</think>"), 154842);
    EXPECT_EQ(tb->find("<tool_call>"), 154843);
    EXPECT_EQ(tb->find("</arg_value>"), 154850);
}

// Every GLM shape flag reaches the file, and the file passes the engine's checks.
TEST_F(GlmGen, ShapeFlagsRoundTrip) {
    const std::string path =
        make("s.gguf",
             "--layers 7 --indexer-types 1,0,0,1,1,0,0 --dense-lead 2 --embd 512 --heads 8 --q-lora 96 --kv-lora 160 "
             "--nope 48 --rope-dim 64 --v-head 40 --indexer-heads 3 --indexer-dim 128 --indexer-top-k 16 "
             "--experts 6 --experts-used 3 --shared-experts 2 --ff 128 --dense-ff 320 --vocab 1000 --ctx 8192 "
             "--indexer-ln-eps 0");
    std::unique_ptr<gguf::File> f;
    const GlmConfig c = open_valid(path, f);
    EXPECT_EQ(c.n_layer, 7u);
    EXPECT_EQ(c.indexer_full, (std::vector<uint8_t>{1, 0, 0, 1, 1, 0, 0}));
    EXPECT_EQ(c.n_dense_lead, 2u);
    EXPECT_EQ(c.n_embd, 512u);
    EXPECT_EQ(c.n_head, 8u);
    EXPECT_EQ(c.q_lora_rank, 96u);
    EXPECT_EQ(c.kv_lora_rank, 160u);
    EXPECT_EQ(c.qk_nope_dim, 48u);
    EXPECT_EQ(c.rope_dim, 64u);
    EXPECT_EQ(c.v_head_dim, 40u);
    EXPECT_EQ(c.indexer_heads, 3u);
    EXPECT_EQ(c.indexer_dim, 128u);
    EXPECT_EQ(c.indexer_top_k, 16u);
    EXPECT_EQ(c.n_expert, 6u);
    EXPECT_EQ(c.n_expert_used, 3u);
    EXPECT_EQ(c.n_expert_shared, 2u);
    EXPECT_EQ(c.expert_ff, 128u);
    EXPECT_EQ(c.dense_ff, 320u);
    EXPECT_EQ(c.n_vocab, 1000u);
    EXPECT_EQ(c.context_length, 8192u);
    EXPECT_EQ(c.layer_norm_eps, 0.0f);
    EXPECT_EQ(f->tensor("blk.1.attn_k_b.weight").ne[0], 48);
    EXPECT_EQ(f->tensor("blk.1.attn_kv_a_mqa.weight").ne[1], 160 + 64);
    EXPECT_EQ(f->tensor("blk.3.ffn_gate_shexp.weight").ne[1], 2 * 128);
    EXPECT_EQ(f->tensor("blk.0.indexer.attn_q_b.weight").ne[1], 3 * 128);

    // Without --indexer-types the layer count follows --layers and tiny's own pattern.
    std::unique_ptr<gguf::File> g;
    const GlmConfig d = open_valid(make("l.gguf", "--layers 8 --dense-lead 0"), g);
    EXPECT_EQ(d.indexer_full, (std::vector<uint8_t>{1, 1, 0, 1, 0, 1, 0, 1}));
    EXPECT_EQ(d.n_dense_lead, 0u);
    EXPECT_NE(g->find_tensor("blk.0.ffn_gate_exps.weight"), nullptr);
}

// Type mixes over GLM's classes: each class gets its type, norms stay F32.
TEST_F(GlmGen, TypeMixesRoundTrip) {
    struct Mix {
        std::string args;
        std::map<std::string, std::string> expect;  // tensor -> type
    };
    const std::vector<Mix> mixes = {
        {"--type all=q8_0 --type exps=q4_k --type embd=q2_k --type output=iq2_xxs --type router=f16 "
         "--type mtp_proj=bf16 --type dense_ffn=q4_k --type shared=q2_k --type indexer=f32 --type indexer_proj=f32 --mtp",
         {{"token_embd.weight", "q2_K"}, {"output.weight", "iq2_xxs"}, {"blk.1.attn_q_b.weight", "q8_0"},
          {"blk.1.attn_k_b.weight", "q8_0"}, {"blk.0.ffn_down.weight", "q4_K"}, {"blk.1.ffn_up_shexp.weight", "q2_K"},
          {"blk.1.ffn_gate_exps.weight", "q4_K"}, {"blk.3.ffn_down_exps.weight", "q4_K"},
          {"blk.1.ffn_gate_inp.weight", "f16"}, {"blk.1.indexer.proj.weight", "f32"},
          {"blk.5.nextn.eh_proj.weight", "bf16"}, {"blk.5.attn_output.weight", "q8_0"},
          {"blk.1.attn_norm.weight", "f32"}, {"blk.1.exp_probs_b.bias", "f32"},
          {"blk.0.indexer.k_norm.bias", "f32"}}},
        {"--type all=f16 --type gate_up_exps=iq2_xxs --type down_exps=q2_k",
         {{"token_embd.weight", "f16"}, {"blk.4.ffn_up_exps.weight", "iq2_xxs"},
          {"blk.4.ffn_down_exps.weight", "q2_K"}, {"blk.0.indexer.attn_k.weight", "f16"},
          {"output_norm.weight", "f32"}}},
        {"--type all=bf16 --type attn=mxfp4 --type indexer=q8_0",
         {{"blk.2.attn_v_b.weight", "mxfp4"}, {"blk.3.indexer.attn_q_b.weight", "q8_0"},
          {"blk.2.ffn_up_shexp.weight", "bf16"}}},
    };
    int i = 0;
    for (const Mix& m : mixes) {
        SCOPED_TRACE(m.args);
        std::unique_ptr<gguf::File> f;
        const GlmConfig c = open_valid(make(fmt::format("m{}.gguf", i++), m.args), f);
        for (const auto& [name, type] : m.expect) EXPECT_EQ(type_of(*f, name), type) << name;
        if (c.n_nextn) {
            EXPECT_NO_THROW(validate_specs(*f, mtp_layout(c)));
        }
    }
}

// The real shape: the full 78-layer file (+ MTP block) as holes, and a truncated glm52 with
// its recipe written out.
TEST_F(GlmGen, Glm52PresetIsThePublishedLayout) {
    std::unique_ptr<gguf::File> f;
    const GlmConfig c = open_valid(make("g.gguf", "--preset glm52 --sparse --mtp"), f);
    EXPECT_EQ(c.n_layer, 78u);
    EXPECT_EQ(c.n_nextn, 1u);
    EXPECT_EQ(c.indexer_full, GlmConfig::glm52().indexer_full);
    EXPECT_EQ(c.n_vocab, 154880u);
    EXPECT_NO_THROW(validate_specs(*f, mtp_layout(c)));
    const size_t n_mtp = mtp_layout(c).size() - 2;  // without nextn.embed_tokens, shared_head_head
    EXPECT_EQ(f->tensors().size(), tensor_layout(c).size() + n_mtp);
    EXPECT_EQ(type_of(*f, "blk.10.ffn_gate_exps.weight"), "q2_K");
    EXPECT_EQ(type_of(*f, "blk.10.ffn_down_exps.weight"), "q4_K");
    EXPECT_EQ(type_of(*f, "blk.10.indexer.proj.weight"), "f32");
    EXPECT_EQ(type_of(*f, "blk.10.ffn_gate_inp.weight"), "f32");
    EXPECT_EQ(type_of(*f, "blk.0.attn_k_b.weight"), "q8_0");
    EXPECT_EQ(type_of(*f, "blk.78.nextn.eh_proj.weight"), "q8_0");
    uint64_t data = 0;
    for (const auto& t : f->tensors()) data += t.n_bytes;
    EXPECT_GT(data, uint64_t(250) << 30);  // ~294 GiB in this recipe
    EXPECT_GE(f->file_size(), data);

    std::unique_ptr<gguf::File> g;
    const GlmConfig d = open_valid(make("g4.gguf", "--preset glm52 --layers 5 --sparse"), g);
    EXPECT_EQ(d.n_layer, 5u);
    EXPECT_EQ(d.n_dense_lead, 3u);
    EXPECT_EQ(d.indexer_full, (std::vector<uint8_t>{1, 1, 1, 0, 0}));
    EXPECT_EQ(d.n_embd, 6144u);
}

TEST_F(GlmGen, MtpBlockLeavesTheTrunkUnchanged) {
    const std::string plain = make("p.gguf", "--seed 4");
    const std::string mtp = make("q.gguf", "--seed 4 --mtp");
    std::unique_ptr<gguf::File> fp, fm;
    const GlmConfig cp = open_valid(plain, fp);
    const GlmConfig cm = open_valid(mtp, fm);
    EXPECT_EQ(cm.n_layer, cp.n_layer);
    EXPECT_EQ(cm.n_nextn, 1u);
    EXPECT_EQ(*fm->find("glm-dsa.block_count")->as_uint(), cp.n_layer + 1);
    for (const auto& t : fp->tensors()) {
        const gguf::TensorInfo& u = fm->tensor(t.name);
        ASSERT_EQ(u.n_bytes, t.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(fp->data(t), fm->data(u), t.n_bytes), 0) << t.name;
    }
    EXPECT_NO_THROW(validate_specs(*fm, mtp_layout(cm)));
    // The block as published files carry it: a routed layer with indexer tensors and the head
    // norm; the embedding and head are the trunk's.
    for (const char* n : {"blk.5.nextn.eh_proj.weight", "blk.5.nextn.enorm.weight", "blk.5.nextn.hnorm.weight",
                          "blk.5.nextn.shared_head_norm.weight", "blk.5.indexer.proj.weight",
                          "blk.5.ffn_gate_exps.weight", "blk.5.exp_probs_b.bias"})
        EXPECT_NE(fm->find_tensor(n), nullptr) << n;
    EXPECT_EQ(fm->find_tensor("blk.5.nextn.embed_tokens.weight"), nullptr);
    EXPECT_EQ(fm->find_tensor("blk.5.nextn.shared_head_head.weight"), nullptr);
    EXPECT_EQ(fm->tensor("blk.5.nextn.eh_proj.weight").ne[0], 2 * 256);
}

// glm_gen.h's scales: products of unit-RMS inputs stay O(1) through any number of layers.
TEST_F(GlmGen, WeightScales) {
    auto f = gguf::File::open(make("w.gguf", "--seed 9 --type exps=q4_k"));
    auto near = [](double got, double want, double tol) { return std::abs(got - want) <= tol * want; };
    const Stats embd = stats(values(*f, "token_embd.weight"));
    EXPECT_NEAR(embd.mean, 0.0, 0.02);
    EXPECT_TRUE(near(embd.rms, 1.0, 0.03)) << embd.rms;
    for (const char* n : {"blk.1.attn_q_a.weight", "blk.1.attn_k_b.weight", "blk.1.attn_v_b.weight",
                          "blk.1.attn_output.weight", "blk.0.ffn_down.weight", "blk.1.indexer.attn_q_b.weight",
                          "output.weight", "blk.1.ffn_gate_exps.weight", "blk.1.ffn_down_exps.weight"}) {
        const gguf::TensorInfo& t = f->tensor(n);
        const Stats s = stats(values(*f, n));
        EXPECT_TRUE(near(s.rms, 1.0 / std::sqrt(double(t.ne[0])), 0.05)) << n << " rms " << s.rms;
        EXPECT_NEAR(s.mean, 0.0, 0.1 * s.rms) << n;
    }
    for (const char* n : {"blk.1.attn_norm.weight", "output_norm.weight", "blk.1.indexer.k_norm.weight"}) {
        const Stats s = stats(values(*f, n));
        EXPECT_NEAR(s.mean, 1.0, 0.05) << n;
        EXPECT_NEAR(s.std, 0.1, 0.04) << n;
    }
    const Stats bias = stats(values(*f, "blk.1.indexer.k_norm.bias"));
    EXPECT_NEAR(bias.mean, 0.0, 0.05);
    EXPECT_NEAR(bias.rms, 0.1, 0.04);
    for (float b : values(*f, "blk.1.exp_probs_b.bias")) EXPECT_LT(std::abs(b), 0.35f);  // 0.1 N, |N| <= 3.46
}

TEST_F(GlmGen, ErrorsNameWhatIsWrong) {
    // attn_q_b's rows are q_lora = 64 values: no 256-value block fits.
    expect_error("--type attn=q4_k", {"q4_K", "class attn", "attn_q_b.weight", "rows of 64"});
    expect_error("--type hc=f16", {"unknown class 'hc'", "glm-dsa"});
    expect_error("--type norm=f16", {"unknown class 'norm'"});
    expect_error("--type exps=q9_k", {"unknown or unsupported type 'q9_k'"});
    expect_error("--type exps", {"CLASS=TYPE"});
    expect_error("--vocab 300", {"--vocab 300", "at least 316"});
    expect_error("--indexer-types 0,1,1,1,1", {"glm-dsa.attention.indexer.types", "entry 0 is shared"});
    expect_error("--indexer-types 1,2", {"--indexer-types", "'2' is not 0 or 1"});
    expect_error("--layers 3 --indexer-types 1,0", {"--indexer-types has 2 entries but --layers is 3"});
    expect_error("--layers 0", {"--layers must be >= 1"});
    expect_error("--dense-lead 6", {"glm-dsa.leading_dense_block_count", "is 6, expected 0 to 5"});
    expect_error("--experts 2 --experts-used 3", {"glm-dsa.expert_used_count"});
    expect_error("--rope-dim 96", {"glm-dsa.attention.indexer.key_length", ">= rope dims 96"});
    expect_error("--indexer-ln-eps -1", {"glm-dsa.attention.layer_norm_epsilon", ">= 0"});
    expect_error("--preset flash", {"unknown glm-dsa preset 'flash'"});
    // deepseek4-only flags are not part of the glm-dsa command line.
    for (const char* flag : {"--hc 4", "--ratios 0,4", "--window 8", "--hash-layers 1", "--real-vocab"}) {
        SCOPED_TRACE(flag);
        const test::RunResult r = run("-q -o " + dir_.file("x.gguf") + " " + flag);
        EXPECT_NE(r.exit_code, 0) << r.output;
    }
}

TEST_F(GlmGen, WarnsAboutShapesLlamaCppCannotRun) {
    const test::RunResult a = run("-o " + dir_.file("a.gguf") + " --indexer-dim 96");
    EXPECT_EQ(a.exit_code, 0) << a.output;
    EXPECT_NE(a.output.find("warning: indexer_dim 96 is not 64 x 2^k"), std::string::npos) << a.output;
    const test::RunResult b = run("-o " + dir_.file("b.gguf") + " --kv-lora 32");  // 32 + rope 32 = 64
    EXPECT_EQ(b.exit_code, 0) << b.output;
    EXPECT_NE(b.output.find("Hadamard rotation to the main KV"), std::string::npos) << b.output;
    const test::RunResult c = run("-o " + dir_.file("c.gguf"));
    EXPECT_EQ(c.output.find("warning"), std::string::npos) << c.output;
    EXPECT_NE(c.output.find("glm-dsa preset tiny"), std::string::npos) << c.output;
}

TEST_F(GlmGen, ArchSelectsTheGenerator) {
    // The deepseek4 generator stays the default and rejects other architectures.
    const test::RunResult v4 =
        test::run_command({kGen, "-q", "--arch", "deepseek4", "-o", dir_.file("v4.gguf")});
    EXPECT_EQ(v4.exit_code, 0) << v4.output;
    EXPECT_EQ(*gguf::File::open(dir_.file("v4.gguf"))->find("general.architecture")->as_string(), "deepseek4");
    const test::RunResult eq = test::run_command({kGen, "-q", "--arch=glm-dsa", "-o", dir_.file("g.gguf")});
    EXPECT_EQ(eq.exit_code, 0) << eq.output;
    EXPECT_EQ(*gguf::File::open(dir_.file("g.gguf"))->find("general.architecture")->as_string(), "glm-dsa");
    const test::RunResult bad = test::run_command({kGen, "--arch", "llama", "-o", dir_.file("x.gguf")});
    EXPECT_NE(bad.exit_code, 0);
    EXPECT_NE(bad.output.find("llama"), std::string::npos) << bad.output;
    const test::RunResult help = test::run_command({kGen, "--arch", "glm-dsa", "--help"});
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_NE(help.output.find("--indexer-types"), std::string::npos);
    EXPECT_NE(help.output.find("glm52"), std::string::npos);
}

}  // namespace
}  // namespace ds4::glm
