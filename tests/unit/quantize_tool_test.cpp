// ds4-quantize end to end on the generator's tiny model: the generator writes the same random
// weights as a GGUF and as an official-style safetensors directory, and
//   safetensors (f32) -> ds4-quantize -> GGUF   equals the generator's GGUF byte for byte
//   GGUF f32 -> ds4-quantize -> GGUF            equals it too (same types, same quantizer)
//   official FP4 experts -> MXFP4               repacked without rounding
//   official FP8/FP4 values                     within their formats' rounding of the originals
// plus the imatrix path (per-expert slices), --dry-run, --overwrite and the error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "gguf/reader.h"
#include "gguf/writer.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"
#include "quant/quant.h"
#include "quantize/ggml_quantize.h"
#include "quantize/imatrix.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

using test::run_command;

// The types of the byte-equality checks: ggml's quantizers and the engine's agree on these
// (the generator quantizes with the engine's; Q2_K/Q4_K/IQ2_XXS fits are its own).
const std::vector<std::string> kGenTypes = {"--type", "exps=q6_k", "--type", "shared=q5_k", "--type", "embd=q6_k",
                                            "--type", "output=q5_k", "--type", "dense=q8_0", "--type", "hc=bf16",
                                            "--type", "router=f16", "--exact-quant"};
const std::vector<std::string> kQuantTypes = {"--experts", "q6_k", "--attention-proj", "q8_0", "--shared", "q5_k",
                                              "--embedding", "q6_k", "--output", "q5_k", "--tensor-type",
                                              "blk.*.hc_*=bf16", "--tensor-type", "output_hc_fn=bf16",
                                              "--tensor-type", "blk.*.ffn_gate_inp.weight=f16"};

std::string bytes_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<std::string> cat(std::vector<std::string> a, const std::vector<std::string>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

class QuantizeTool : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        const std::string gen = test::binary("ds4-gguf-gen");
        auto must = [](const test::RunResult& r) { ASSERT_EQ(r.exit_code, 0) << r.output; };
        must(run_command({gen, "-q", "--seed", "5", "-o", file("f32.gguf"), "--hf-out", file("hf32"), "--hf-dtypes", "f32"}));
        must(run_command({gen, "-q", "--seed", "5", "-o", file("f32b.gguf"), "--hf-out", file("hfoff")}));
        must(run_command(cat({gen, "-q", "--seed", "5", "-o", file("mix.gguf")}, kGenTypes)));
    }
    static void TearDownTestSuite() { delete dir_; }
    static std::string file(const std::string& n) { return dir_->file(n); }
    static test::RunResult quantize(const std::vector<std::string>& args) {
        return run_command(cat({test::binary("ds4-quantize"), "-q", "--threads", "2"}, args));
    }
    static test::TempDir* dir_;
};
test::TempDir* QuantizeTool::dir_ = nullptr;

TEST_F(QuantizeTool, SafetensorsAndGgufInputsGiveTheGeneratorsFileByteForByte) {
    ASSERT_EQ(bytes_of(file("f32.gguf")), bytes_of(file("f32b.gguf")));  // --hf-out changes nothing
    auto r = quantize({"--hf", file("hf32"), "--template", file("f32.gguf"), "--out", file("a.gguf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(bytes_of(file("a.gguf")) == bytes_of(file("f32.gguf"))) << "F32 from safetensors differs";

    r = quantize(cat({"--hf", file("hf32"), "--template", file("mix.gguf"), "--out", file("b.gguf")}, kQuantTypes));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(bytes_of(file("b.gguf")) == bytes_of(file("mix.gguf"))) << "mix from safetensors differs";

    r = quantize(cat({"--in", file("f32.gguf"), "--out", file("c.gguf")}, kQuantTypes));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(bytes_of(file("c.gguf")) == bytes_of(file("mix.gguf"))) << "mix from the F32 GGUF differs";
    // And the comparison mode agrees: nothing differs (exit 0), one retyped tensor does (exit 2).
    r = quantize(cat({"--in", file("f32.gguf"), "--compare-gguf", file("mix.gguf")}, kQuantTypes));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    r = quantize({"--in", file("f32.gguf"), "--compare-gguf", file("mix.gguf"), "--compare-tensor", "output.weight"});
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("byte_compare: FAIL"), std::string::npos) << r.output;
}

TEST_F(QuantizeTool, OfficialFp4ExpertsRepackToMxfp4WithoutRounding) {
    auto r = quantize({"--hf", file("hfoff"), "--template", file("f32.gguf"), "--out", file("off-f32.gguf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = quantize({"--hf", file("hfoff"), "--template", file("f32.gguf"), "--experts", "mxfp4", "--out", file("off-mx.gguf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    // MXFP4 dequantized back to F32 equals the FP4 values read as floats, tensor for tensor.
    r = quantize({"--in", file("off-mx.gguf"), "--experts", "f32", "--compare-gguf", file("off-f32.gguf")});
    EXPECT_EQ(r.exit_code, 0) << r.output;

    // The official encodings round the generator's values: FP8 E4M3 (3 mantissa bits) to
    // within 2^-4 of each value's magnitude scale, FP4 E2M1 coarser; relative RMS measured
    // 0.027 (FP8), 0.112 (FP4), 0.0017 (BF16).
    const auto orig = gguf::File::open(file("f32.gguf"));
    const auto off = gguf::File::open(file("off-f32.gguf"));
    auto rel_rms = [&](const std::string& name) {
        const auto& t = orig->tensor(name);
        const float* a = reinterpret_cast<const float*>(orig->data(t));
        const float* b = reinterpret_cast<const float*>(off->data(off->tensor(name)));
        double num = 0, den = 0;
        for (int64_t i = 0; i < t.n_elements(); ++i) num += double(a[i] - b[i]) * (a[i] - b[i]), den += double(a[i]) * a[i];
        return std::sqrt(num / den);
    };
    const double fp8 = rel_rms("blk.2.ffn_up_shexp.weight"), fp4 = rel_rms("blk.2.ffn_up_exps.weight");
    const double bf16 = rel_rms("token_embd.weight"), exact = rel_rms("blk.2.hc_attn_fn.weight");
    EXPECT_GT(fp8, 0.005);
    EXPECT_LT(fp8, 0.04);
    EXPECT_GT(fp4, 0.05);
    EXPECT_LT(fp4, 0.2);
    EXPECT_LT(bf16, 0.004);
    EXPECT_EQ(exact, 0.0);
    std::printf("relative RMS after the official encodings: fp8 %.4f, fp4 %.4f, bf16 %.5f\n", fp8, fp4, bf16);
}

TEST_F(QuantizeTool, ImatrixWeightsEachExpertWithItsOwnSlice) {
    const auto src = gguf::File::open(file("f32.gguf"));
    const std::string name = "blk.1.ffn_down_exps.weight";
    const auto& t = src->tensor(name);
    quantize::Imatrix m;
    std::vector<float>& w = m.entries[name];
    for (int64_t i = 0; i < t.ne[0] * t.ne[2]; ++i) w.push_back(0.1f + float((i * 7919) % 97));
    m.save_legacy(file("im.dat"));
    auto r = quantize({"--in", file("f32.gguf"), "--routed-w2", "q4_k", "--imatrix", file("im.dat"), "--out", file("im.gguf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto out = gguf::File::open(file("im.gguf"));
    const auto& q = out->tensor(name);
    ASSERT_EQ(q.type, TensorType::Q4_K);
    EXPECT_TRUE(out->find("quantize.imatrix.file"));
    // Each expert's rows quantized with that expert's weights, as ggml would.
    const int64_t n = t.ne[0], rows = t.ne[1];
    const size_t per = row_bytes(TensorType::Q4_K, n) * size_t(rows);
    std::vector<uint8_t> want(per);
    for (int64_t e = 0; e < t.ne[2]; ++e) {
        const float* x = reinterpret_cast<const float*>(src->data(t)) + e * rows * n;
        quantize::quantize_rows(TensorType::Q4_K, x, want.data(), rows, n, w.data() + e * n);
        EXPECT_EQ(std::memcmp(want.data(), out->data(q) + e * per, per), 0) << "expert " << e;
    }
    // Without the imatrix the bytes differ (the weights changed something).
    quantize::quantize_rows(TensorType::Q4_K, reinterpret_cast<const float*>(src->data(t)), want.data(), rows, n, nullptr);
    EXPECT_NE(std::memcmp(want.data(), out->data(q), per), 0);
}

TEST_F(QuantizeTool, Iq2xxsWithoutImatrixUsesEachExpertsColumnEnergy) {
    // ggml's IQ2_XXS needs weights; without an imatrix, upstream's stand-in: per expert the
    // sum over its rows of each column's square.
    auto r = quantize({"--in", file("f32.gguf"), "--tensor-type", "blk.4.ffn_gate_exps.weight=iq2_xxs", "--out", file("iq.gguf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto src = gguf::File::open(file("f32.gguf"));
    const auto out = gguf::File::open(file("iq.gguf"));
    const auto& t = src->tensor("blk.4.ffn_gate_exps.weight");
    const auto& q = out->tensor(t.name);
    ASSERT_EQ(q.type, TensorType::IQ2_XXS);
    const int64_t n = t.ne[0], rows = t.ne[1];
    const size_t per = row_bytes(TensorType::IQ2_XXS, n) * size_t(rows);
    std::vector<uint8_t> want(per);
    for (int64_t e = 0; e < t.ne[2]; e += 3) {
        const float* x = reinterpret_cast<const float*>(src->data(t)) + e * rows * n;
        std::vector<float> energy(size_t(n), 0.0f);
        for (int64_t i = 0; i < rows; ++i)
            for (int64_t c = 0; c < n; ++c) energy[size_t(c)] += x[i * n + c] * x[i * n + c];
        quantize::quantize_rows(TensorType::IQ2_XXS, x, want.data(), rows, n, energy.data());
        EXPECT_EQ(std::memcmp(want.data(), out->data(q) + e * per, per), 0) << "expert " << e;
    }
}

TEST_F(QuantizeTool, DryRunOverwriteAndErrors) {
    auto r = quantize({"--in", file("f32.gguf"), "--dry-run", "--experts", "q2_k"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    for (const char* s : {"routed_w1", "routed_w2", "f32->q2_K x6", "total"})
        EXPECT_NE(r.output.find(s), std::string::npos) << s << "\n" << r.output;

    // An existing output is kept unless --overwrite.
    std::ofstream(file("keep.gguf")) << "old";
    r = quantize({"--in", file("f32.gguf"), "--out", file("keep.gguf")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("--overwrite"), std::string::npos) << r.output;
    EXPECT_EQ(bytes_of(file("keep.gguf")), "old");
    r = quantize({"--in", file("f32.gguf"), "--out", file("keep.gguf"), "--overwrite"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(bytes_of(file("keep.gguf")) == bytes_of(file("f32.gguf")));

    // A type whose blocks do not divide a tensor's rows names the tensor; nothing is written.
    r = quantize({"--in", file("f32.gguf"), "--attention-proj", "q4_k", "--out", file("bad.gguf")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("blk.0.attn_q_b.weight"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(file("bad.gguf")));

    // A safetensors tensor missing from the directory: the official name in the message.
    std::filesystem::copy(file("hf32"), file("hfcut"));
    const std::string shard = file("hfcut/model-00002-of-00007.safetensors");
    std::filesystem::resize_file(shard, 1000);
    r = quantize({"--hf", file("hfcut"), "--template", file("f32.gguf"), "--out", file("cut.gguf")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("model-00002-of-00007.safetensors"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(file("cut.gguf")));
}

TEST_F(QuantizeTool, SpliceTakesTheChosenLayersExpertsFromTheDonor) {
    const std::string splice = test::binary("ds4-splice");
    auto r = run_command({splice, "--base", file("f32.gguf"), "--donor", file("mix.gguf"), "--layers", "2-3,5",
                          "--out", file("sp.gguf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto base = gguf::File::open(file("f32.gguf"));
    const auto donor = gguf::File::open(file("mix.gguf"));
    const auto sp = gguf::File::open(file("sp.gguf"));
    ASSERT_EQ(sp->tensors().size(), base->tensors().size());
    int from_donor = 0;
    for (const auto& t : sp->tensors()) {
        const bool expert = t.name.find("_exps.weight") != std::string::npos;
        const bool chosen = t.name.rfind("blk.2.", 0) == 0 || t.name.rfind("blk.3.", 0) == 0 || t.name.rfind("blk.5.", 0) == 0;
        const gguf::File& src = expert && chosen ? *donor : *base;
        const auto& o = src.tensor(t.name);
        from_donor += &src == donor.get();
        EXPECT_EQ(t.type, o.type) << t.name;
        ASSERT_EQ(t.n_bytes, o.n_bytes) << t.name;
        EXPECT_EQ(std::memcmp(sp->data(t), src.data(o), t.n_bytes), 0) << t.name;
    }
    EXPECT_EQ(from_donor, 9);
    EXPECT_EQ(sp->get_string("quantize.splice.layers"), "2-3,5");
    // The engine accepts the mixed file.
    const auto cfg = deepseek4::ModelConfig::from_gguf(*sp);
    EXPECT_NO_THROW(deepseek4::validate_tensors(*sp, cfg));

    // Files of different models, layers out of range, an existing output: errors, no file.
    const std::string gen = test::binary("ds4-gguf-gen");
    ASSERT_EQ(run_command({gen, "-q", "--seed", "5", "--ff", "512", "-o", file("other.gguf")}).exit_code, 0);
    r = run_command({splice, "--base", file("f32.gguf"), "--donor", file("other.gguf"), "--layers", "1", "--out", file("x.gguf")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("different models"), std::string::npos) << r.output;
    r = run_command({splice, "--base", file("f32.gguf"), "--donor", file("mix.gguf"), "--layers", "4-9", "--out", file("x.gguf")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("layer 6 is not in"), std::string::npos) << r.output;
    r = run_command({splice, "--base", file("f32.gguf"), "--donor", file("mix.gguf"), "--layers", "1", "--out", file("sp.gguf")});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("--force"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(file("x.gguf")));
}

// general.file_type names the mix written (llama.cpp's enum llama_ftype), not the template's:
// the type with the most bytes among the matrices. A template without the key (the
// generator's) gives a file without it.
TEST_F(QuantizeTool, FileTypeIsTheMixWrittenNotTheTemplates) {
    const auto src = gguf::File::open(file("f32.gguf"));
    ASSERT_EQ(src->find("general.file_type"), nullptr);
    {
        gguf::Writer w(file("ft.gguf"), src->alignment());
        for (const auto& [key, value] : src->metadata())
            if (key != "general.alignment") w.set(key, value);
        w.set("general.file_type", gguf::Value::u32(7));  // claims MOSTLY_Q8_0
        for (const auto& t : src->tensors()) w.add_tensor(t.name, t.type, {t.ne.begin(), t.ne.begin() + t.n_dims});
        w.begin_data();
        for (const auto& t : src->tensors()) w.write_tensor(t.name, {src->data(t), t.n_bytes});
        w.finish();
    }
    auto ftype = [](const std::string& path) { return gguf::File::open(path)->get_u32("general.file_type"); };
    auto r = quantize({"--in", file("ft.gguf"), "--out", file("ft-same.gguf")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(ftype(file("ft-same.gguf")), 0u);  // LLAMA_FTYPE_ALL_F32: every matrix is F32
    // The rest Q8_0 (3.0 MiB on this model): Q4_K experts (5.1 MiB) and MXFP4 ones (4.8 MiB)
    // outweigh it; with only the experts retyped the F32 rest (8.5 MiB) would.
    const std::vector<std::string> rest = {"--shared", "q8_0", "--attention", "q8_0", "--attention-proj", "q8_0",
                                           "--dense", "q8_0", "--embedding", "q8_0", "--output", "q8_0"};
    r = quantize(cat({"--in", file("ft.gguf"), "--out", file("ft-q4.gguf"), "--experts", "q4_k"}, rest));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(ftype(file("ft-q4.gguf")), 15u);  // MOSTLY_Q4_K_M
    r = quantize(cat({"--in", file("ft.gguf"), "--out", file("ft-mx.gguf"), "--experts", "mxfp4"}, rest));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(ftype(file("ft-mx.gguf")), 38u);  // MOSTLY_MXFP4_MOE
    r = quantize(cat({"--in", file("ft.gguf"), "--out", file("ft-q8.gguf"), "--experts", "q8_0"}, rest));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(ftype(file("ft-q8.gguf")), 7u);   // MOSTLY_Q8_0
    r = quantize({"--in", file("ft.gguf"), "--out", file("ft-f32x.gguf"), "--experts", "q4_k"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(ftype(file("ft-f32x.gguf")), 0u);  // the F32 rest holds more bytes than the experts
    r = quantize({"--in", file("f32.gguf"), "--out", file("noft.gguf"), "--experts", "q4_k"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(gguf::File::open(file("noft.gguf"))->find("general.file_type"), nullptr);
}

}  // namespace
}  // namespace ds4
