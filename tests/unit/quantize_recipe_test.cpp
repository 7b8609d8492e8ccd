// ds4-quantize's library without files of a model: the families and type rules of a recipe,
// the imatrix reader (legacy .dat normalisation, per-expert slices, malformed files), and
// the official names of GGUF tensors.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>

#include "common/error.h"
#include "quantize/imatrix.h"
#include "quantize/recipe.h"
#include "quantize/safetensors.h"
#include "support/tool_run.h"

namespace ds4::quantize {
namespace {

TEST(QuantizeRecipe, FamiliesOfTheV4Layout) {
    const TensorType f = TensorType::F32;
    EXPECT_EQ(family_of("blk.3.ffn_gate_exps.weight", 3, f), Family::RoutedW1);
    EXPECT_EQ(family_of("blk.3.ffn_up_exps.weight", 3, f), Family::RoutedW3);
    EXPECT_EQ(family_of("blk.3.ffn_down_exps.weight", 3, f), Family::RoutedW2);
    EXPECT_EQ(family_of("blk.3.ffn_down_shexp.weight", 2, f), Family::Shared);
    EXPECT_EQ(family_of("blk.3.attn_q_b.weight", 2, f), Family::AttentionProj);
    EXPECT_EQ(family_of("blk.3.attn_output_a.weight", 2, f), Family::AttentionProj);
    EXPECT_EQ(family_of("blk.3.indexer.attn_q_b.weight", 2, f), Family::Attention);
    EXPECT_EQ(family_of("blk.3.attn_compressor_kv.weight", 2, f), Family::Attention);
    EXPECT_EQ(family_of("blk.3.indexer.proj.weight", 2, f), Family::Attention);
    EXPECT_EQ(family_of("token_embd.weight", 2, f), Family::Embedding);
    EXPECT_EQ(family_of("output.weight", 2, f), Family::Output);
    EXPECT_EQ(family_of("output_hc_fn.weight", 2, f), Family::Dense);
    EXPECT_EQ(family_of("blk.3.ffn_gate_inp.weight", 2, f), Family::Dense);
    EXPECT_EQ(family_of("blk.3.attn_norm.weight", 1, f), Family::Fixed);
    EXPECT_EQ(family_of("blk.0.ffn_gate_tid2eid.weight", 2, TensorType::I32), Family::Fixed);
}

TEST(QuantizeRecipe, TypesNamesAndRules) {
    EXPECT_EQ(parse_type("Q4_K"), TensorType::Q4_K);
    EXPECT_EQ(parse_type("iq2-xxs"), TensorType::IQ2_XXS);
    EXPECT_EQ(parse_type("q80"), TensorType::Q8_0);
    EXPECT_EQ(parse_type("copy"), std::nullopt);
    EXPECT_THROW(parse_type("q3_k"), Error);  // a ggml type the engine does not run
    EXPECT_THROW(parse_override("blk.1.=") , Error);
    EXPECT_THROW(parse_override("q4_k"), Error);

    Recipe r;
    r.family[size_t(Family::RoutedW1)] = TensorType::IQ2_XXS;
    r.family[size_t(Family::RoutedW2)] = TensorType::Q2_K;
    r.family[size_t(Family::Dense)] = TensorType::F16;
    r.overrides.push_back(parse_override("blk.40.=q4_k"));                        // prefix
    r.overrides.push_back(parse_override("blk.*.ffn_down_exps.weight=copy"));      // glob, keep
    const TensorType f = TensorType::F32;
    EXPECT_EQ(choose_type(r, "blk.3.ffn_gate_exps.weight", 3, f), TensorType::IQ2_XXS);
    EXPECT_EQ(choose_type(r, "blk.3.ffn_up_exps.weight", 3, f), f);  // no flag: kept
    EXPECT_EQ(choose_type(r, "blk.40.ffn_gate_exps.weight", 3, f), TensorType::Q4_K);
    EXPECT_EQ(choose_type(r, "blk.4.ffn_gate_exps.weight", 3, f), TensorType::IQ2_XXS);  // not "blk.40."
    EXPECT_EQ(choose_type(r, "blk.3.ffn_down_exps.weight", 3, TensorType::Q4_K), TensorType::Q4_K);
    EXPECT_EQ(choose_type(r, "blk.3.ffn_gate_inp.weight", 2, f), TensorType::F16);
    EXPECT_EQ(choose_type(r, "blk.40.attn_norm.weight", 1, f), f);  // vectors never retyped
    EXPECT_TRUE(pattern_matches("blk.*.hc_*", "blk.12.hc_ffn_fn.weight"));
    EXPECT_FALSE(pattern_matches("blk.*.hc_*", "output_hc_fn.weight"));
}

TEST(QuantizeImatrix, LegacyRoundTripNormalisesByCalls) {
    test::TempDir dir;
    Imatrix m;
    m.entries["blk.0.ffn_down_exps.weight"] = {1, 2, 3, 4, 5, 6};  // 2 experts x 3 columns
    m.entries["blk.0.attn_q_a.weight"] = {0.5f, 0.25f, 8};
    m.datasets = {"calib.txt"};
    m.chunks = 7;
    m.save_legacy(dir.file("a.dat"));
    const Imatrix back = Imatrix::load(dir.file("a.dat"));
    EXPECT_EQ(back.entries, m.entries);
    EXPECT_EQ(back.chunks, 7);
    ASSERT_EQ(back.datasets.size(), 1u);
    EXPECT_EQ(back.datasets[0], "calib.txt");
    EXPECT_EQ(back.weights("blk.0.ffn_down_exps.weight", 3, 2, 1)[0], 4.f);  // expert 1's slice
    EXPECT_EQ(back.weights("blk.0.attn_q_a.weight", 3, 1, 0)[2], 8.f);
    EXPECT_EQ(back.weights("missing", 3, 1, 0), nullptr);
    EXPECT_THROW(back.weights("blk.0.ffn_down_exps.weight", 4, 2, 0), Error);

    // A file with ncall 4: values are sums over 4 calls and come back divided.
    std::ofstream(dir.file("b.dat"), std::ios::binary).write("\x01\0\0\0\x01\0\0\0x\x04\0\0\0\x02\0\0\0", 17)
        .write("\0\0\x80\x40\0\0\0\x41", 8);  // 4.0f, 8.0f
    const Imatrix b = Imatrix::load(dir.file("b.dat"));
    EXPECT_EQ(b.entries.at("x"), (std::vector<float>{1.f, 2.f}));
    // Truncated: the error names the file.
    std::ofstream(dir.file("c.dat"), std::ios::binary).write("\x01\0\0\0\x01\0\0\0x\x04\0\0\0\x09\0\0\0", 17);
    try {
        Imatrix::load(dir.file("c.dat"));
        FAIL() << "no error";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("c.dat"), std::string::npos) << e.what();
    }
}

TEST(QuantizeSafetensors, OfficialNames) {
    EXPECT_EQ(SafetensorsDir::hf_name("token_embd.weight"), "embed.weight");
    EXPECT_EQ(SafetensorsDir::hf_name("output_hc_fn.weight"), "hc_head_fn");
    EXPECT_EQ(SafetensorsDir::hf_name("blk.7.attn_kv.weight"), "layers.7.attn.wkv.weight");
    EXPECT_EQ(SafetensorsDir::hf_name("blk.7.indexer_compressor_ape.weight"), "layers.7.attn.indexer.compressor.ape");
    EXPECT_EQ(SafetensorsDir::hf_name("blk.12.ffn_down_exps.weight"), "layers.12.ffn.experts.w2");
    EXPECT_EQ(SafetensorsDir::hf_name("blk.1.ffn_gate_tid2eid.weight"), "layers.1.ffn.gate.tid2eid");
    EXPECT_THROW(SafetensorsDir::hf_name("blk.1.nonsense.weight"), Error);
}

}  // namespace
}  // namespace ds4::quantize
