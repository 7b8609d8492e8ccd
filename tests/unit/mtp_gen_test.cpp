// ds4-gguf-gen's MTP heads: --mtp-out writes upstream's support GGUF (its metadata and the 32
// mtp.0.* tensors), --mtp-embedded the same head in llama.cpp's layout in the model file; with
// one seed both hold the same weights (eh_proj rows = e_proj row | h_proj row, the support
// file's hc_head = the model's output_hc), in the types of the recipe, and the trunk's tensors
// are the file without the head's, byte for byte.
#include <gtest/gtest.h>


#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>

#include "gguf/reader.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"
#include "support/gguf_test_util.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

const std::string kGen = std::string(DS4_BIN_DIR) + "/ds4-gguf-gen";

struct GenRun {
    int status;
    std::string output;
};

// ds4-gguf-gen -q ARGS (split by the shell), its exit status and output.
GenRun gen(const std::string& args) {
    const test::RunResult r = test::run_command({"/bin/sh", "-c", kGen + " -q " + args});
    return {r.exit_code, r.output};
}

class MtpGen : public ::testing::Test {
protected:
    void SetUp() override { ASSERT_TRUE(std::filesystem::exists(kGen)) << kGen << " is missing"; }
    std::string path(const std::string& name) const { return dir_.file(name); }
    void make(const std::string& args) {
        const GenRun r = gen(args);
        ASSERT_EQ(r.status, 0) << r.output;
    }
    test::ScratchDir dir_;
};

std::vector<std::string> names(const gguf::File& f) {
    std::vector<std::string> v;
    for (const auto& t : f.tensors()) v.push_back(t.name);
    return v;
}

std::vector<int64_t> shape(const gguf::TensorInfo& t) { return {t.ne.begin(), t.ne.begin() + t.n_dims}; }

bool same_bytes(const gguf::File& a, const std::string& na, const gguf::File& b, const std::string& nb) {
    const gguf::TensorInfo& x = a.tensor(na);
    const gguf::TensorInfo& y = b.tensor(nb);
    return x.type == y.type && x.n_bytes == y.n_bytes && std::memcmp(a.data(x), b.data(y), x.n_bytes) == 0;
}

TEST_F(MtpGen, SupportFileHasUpstreamsMetadataAndTensors) {
    make("-o " + path("m.gguf") + " --preset tiny --seed 3 --mtp-out " + path("mtp.gguf"));
    const auto model = gguf::File::open(path("m.gguf"));
    const ModelConfig cfg = ModelConfig::from_gguf(*model);
    EXPECT_EQ(cfg.n_nextn, 0u);  // --mtp-out alone leaves the model file as it was
    const auto f = gguf::File::open(path("mtp.gguf"));
    EXPECT_EQ(*f->find("general.architecture")->as_string(), "deepseek4_mtp_support");
    EXPECT_EQ(*f->find("general.name")->as_string(), cfg.name + " MTP support");
    EXPECT_EQ(*f->find("deepseek4.expert_count")->as_uint(), cfg.n_expert);
    EXPECT_EQ(*f->find("deepseek4.mtp_layer_count")->as_uint(), 1u);
    EXPECT_EQ(*f->find("deepseek4.nextn_predict_layers")->as_uint(), 1u);

    const auto layout = mtp_support_layout(cfg);
    ASSERT_EQ(f->tensors().size(), 32u);
    std::vector<std::string> want;
    for (const auto& s : layout) want.push_back(s.name);
    EXPECT_EQ(names(*f), want);
    for (const auto& s : layout) {
        EXPECT_EQ(shape(f->tensor(s.name)), s.ne) << s.name;
        EXPECT_EQ(f->tensor(s.name).type, TensorType::F32) << s.name;  // tiny: all F32
    }
    EXPECT_NO_THROW(validate_specs(*f, cfg, layout));
}

TEST_F(MtpGen, EmbeddedHeadIsLlamaCppsLayoutBesideAnUnchangedTrunk) {
    make("-o " + path("plain.gguf") + " --preset tiny --seed 3");
    make("-o " + path("emb.gguf") + " --preset tiny --seed 3 --mtp-embedded");
    const auto plain = gguf::File::open(path("plain.gguf"));
    const auto emb = gguf::File::open(path("emb.gguf"));
    EXPECT_EQ(*emb->find("deepseek4.block_count")->as_uint(), 7u);
    EXPECT_EQ(*emb->find("deepseek4.nextn_predict_layers")->as_uint(), 1u);
    EXPECT_EQ(emb->find("deepseek4.attention.compress_ratios")->elems.size(), 7u);
    EXPECT_EQ(*emb->find("deepseek4.attention.compress_ratios")->elem_int(6), 0);
    EXPECT_EQ(emb->find("deepseek4.swiglu_clamp_exp")->elems.size(), 7u);
    const ModelConfig cfg = ModelConfig::from_gguf(*emb);
    EXPECT_EQ(cfg.n_layer, 6u);
    EXPECT_EQ(cfg.n_nextn, 1u);

    // The trunk: every tensor of the plain file, the same bytes; then the head, blk.6.*.
    EXPECT_NO_THROW(validate_tensors(*emb, cfg));
    for (const auto& t : plain->tensors()) EXPECT_TRUE(same_bytes(*plain, t.name, *emb, t.name)) << t.name;
    const NextnLayout l = mtp_embedded_layout(cfg, 6);
    EXPECT_NO_THROW(validate_specs(*emb, cfg, l.required));
    EXPECT_NO_THROW(validate_specs(*emb, cfg, l.optional, /*required=*/false));
    ASSERT_TRUE(emb->find_tensor("blk.6.nextn.shared_head_norm.weight"));
    EXPECT_FALSE(emb->find_tensor("blk.6.nextn.embed_tokens.weight"));  // token_embd serves
    EXPECT_FALSE(emb->find_tensor("blk.6.nextn.shared_head_head.weight"));  // output serves
    EXPECT_EQ(emb->tensors().size(), plain->tensors().size() + l.required.size() + 1);
    for (const auto& t : emb->tensors()) {
        unsigned layer = 0;
        if (std::sscanf(t.name.c_str(), "blk.%u.", &layer) == 1) {
            EXPECT_LE(layer, 6u) << t.name;
        }
    }
}

// Both layouts, one seed: the same head. Q8_0 projections, Q4_K experts, Q8_0 dense: the rows
// of a quantized eh_proj are the two halves' blocks side by side.
TEST_F(MtpGen, BothLayoutsHoldTheSameWeights) {
    const std::string types = " --type mtp_proj=q8_0 --type exps=q4_k --type dense=q8_0 --type hc=f16";
    make("-o " + path("emb.gguf") + " --preset tiny --seed 9 --mtp-embedded --mtp-out " + path("mtp.gguf") + types);
    const auto emb = gguf::File::open(path("emb.gguf"));
    const auto sup = gguf::File::open(path("mtp.gguf"));
    const ModelConfig cfg = ModelConfig::from_gguf(*emb);

    EXPECT_EQ(sup->tensor("mtp.0.e_proj.weight").type, TensorType::Q8_0);
    EXPECT_EQ(sup->tensor("mtp.0.ffn_up_exps.weight").type, TensorType::Q4_K);
    EXPECT_EQ(sup->tensor("mtp.0.attn_q_b.weight").type, TensorType::Q8_0);
    EXPECT_EQ(sup->tensor("mtp.0.hc_head_fn.weight").type, TensorType::F16);
    EXPECT_EQ(emb->tensor("blk.6.nextn.eh_proj.weight").type, TensorType::Q8_0);

    for (const TensorSpec& s : layer_tensor_layout(cfg, "", 6, {0, false}))
        EXPECT_TRUE(same_bytes(*sup, "mtp.0." + s.name, *emb, "blk.6." + s.name)) << s.name;
    EXPECT_TRUE(same_bytes(*sup, "mtp.0.enorm.weight", *emb, "blk.6.nextn.enorm.weight"));
    EXPECT_TRUE(same_bytes(*sup, "mtp.0.hnorm.weight", *emb, "blk.6.nextn.hnorm.weight"));
    EXPECT_TRUE(same_bytes(*sup, "mtp.0.norm.weight", *emb, "blk.6.nextn.shared_head_norm.weight"));
    // llama.cpp's MTP head mixes with the root output_hc_*: the support file's hc_head is it.
    EXPECT_TRUE(same_bytes(*sup, "mtp.0.hc_head_fn.weight", *emb, "output_hc_fn.weight"));
    EXPECT_TRUE(same_bytes(*sup, "mtp.0.hc_head_base.weight", *emb, "output_hc_base.weight"));
    EXPECT_TRUE(same_bytes(*sup, "mtp.0.hc_head_scale.weight", *emb, "output_hc_scale.weight"));

    const gguf::TensorInfo& e = sup->tensor("mtp.0.e_proj.weight");
    const gguf::TensorInfo& h = sup->tensor("mtp.0.h_proj.weight");
    const gguf::TensorInfo& eh = emb->tensor("blk.6.nextn.eh_proj.weight");
    const size_t half = row_bytes(TensorType::Q8_0, cfg.n_embd);
    ASSERT_EQ(eh.n_bytes, 2 * e.n_bytes);
    for (uint32_t r = 0; r < cfg.n_embd; ++r) {
        ASSERT_EQ(std::memcmp(emb->data(eh) + 2 * half * r, sup->data(e) + half * r, half), 0) << "row " << r;
        ASSERT_EQ(std::memcmp(emb->data(eh) + 2 * half * r + half, sup->data(h) + half * r, half), 0) << "row " << r;
    }
    // Different weights per tensor (the streams are per name): e_proj is not h_proj.
    EXPECT_NE(std::memcmp(sup->data(e), sup->data(h), e.n_bytes), 0);
}

// The Flash preset's recipe gives upstream's support-file types (spec/ARCHITECTURE.md §2.4).
TEST_F(MtpGen, FlashRecipeHasUpstreamsTypes) {
    make("-o " + path("f.gguf") + " --preset flash --layers 2 --sparse --mtp-out " + path("mtp.gguf"));
    const auto f = gguf::File::open(path("mtp.gguf"));
    EXPECT_EQ(f->tensor("mtp.0.e_proj.weight").type, TensorType::Q8_0);
    EXPECT_EQ(f->tensor("mtp.0.h_proj.weight").type, TensorType::Q8_0);
    EXPECT_EQ(f->tensor("mtp.0.hc_head_fn.weight").type, TensorType::F16);
    EXPECT_EQ(f->tensor("mtp.0.attn_q_a.weight").type, TensorType::Q8_0);
    EXPECT_EQ(f->tensor("mtp.0.ffn_gate_shexp.weight").type, TensorType::Q8_0);
    EXPECT_EQ(f->tensor("mtp.0.norm.weight").type, TensorType::F32);
    EXPECT_EQ(shape(f->tensor("mtp.0.hc_head_fn.weight")), (std::vector<int64_t>{16384, 4}));
}

TEST_F(MtpGen, RefusesTheModelFileAsSupportFileAndDocumentsTheFlags) {
    const GenRun r = gen("-o " + path("m.gguf") + " --preset tiny --mtp-out " + path("m.gguf"));
    EXPECT_NE(r.status, 0);
    EXPECT_NE(r.output.find("--mtp-out"), std::string::npos) << r.output;
    const GenRun bad = gen("-o " + path("m.gguf") + " --preset tiny --embd 320 --type mtp_proj=q4_k --mtp-embedded");
    EXPECT_NE(bad.status, 0);
    EXPECT_NE(bad.output.find("mtp.0.e_proj.weight"), std::string::npos) << bad.output;
    const GenRun help = gen("--help");
    EXPECT_NE(help.output.find("--mtp-out"), std::string::npos);
    EXPECT_NE(help.output.find("--mtp-embedded"), std::string::npos);
    EXPECT_NE(help.output.find("mtp_proj"), std::string::npos);
}

}  // namespace
}  // namespace ds4::deepseek4
