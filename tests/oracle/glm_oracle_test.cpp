// llama.cpp's glm-dsa runs the files `ds4-gguf-gen --arch glm-dsa` writes (issue 32, "Notes on the
// oracle"): a tiny all-F32 model loads, its prefill, one-token decode and chunked prefill agree
// (F32 KV, flash attention off), the indexer's top-k is active past top-k positions, the MTP
// block leaves the trunk's logits unchanged and runs as llama.cpp's MTP context, routing dumps
// and indexer dumps work, and the generated glm4 vocabulary tokenizes as ours does. Our own GLM
// forward pass against these: glm_model_oracle_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "support/compare.h"
#include "support/route_dump.h"
#include "support/tool_run.h"
#include "tokenizer/tokenizer.h"

namespace ds4::oracle {

using namespace ds4::test;
namespace {

// ds4-gguf-gen --arch glm-dsa's tiny preset (5 layers: 0 dense; indexer types 1,1,0,1,0; top-k
// 8; 4 experts, 2 used), F32, with the indexer key LayerNorm eps llama.cpp uses (0).
constexpr int kVocab = 512;
constexpr int kLayers = 5;
constexpr int kDenseLead = 1;
constexpr int kTopK = 8;
constexpr int kExperts = 4;
constexpr int kExpertsUsed = 2;
constexpr int kEmbd = 256;
constexpr int kTokens = 48;  // > top-k: most positions choose their keys

// Issue 32: with F32 weights and KV, llama.cpp's prefill and decode agree to ~1.5e-5.
constexpr double kRelTol = 1e-4;

bool bit_identical(const Logits& a, const Logits& b) {
    return a.n_tokens == b.n_tokens && !a.values.empty() && a.values.size() == b.values.size() &&
           std::memcmp(a.values.data(), b.values.data(), a.values.size() * sizeof(float)) == 0;
}

class GlmOracle : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir();
        runs_ = new std::map<std::string, Logits>();
        model_ = generate("tiny.gguf", {});
        tokens_ = dir_->file("tokens.txt");
        write_token_ids(tokens_, random_token_ids(kTokens, kVocab, 21));
    }
    static void TearDownTestSuite() {
        delete runs_;
        delete dir_;
        runs_ = nullptr;
        dir_ = nullptr;
    }

    static std::string generate(const std::string& name, std::vector<std::string> extra) {
        const std::string path = dir_->file(name);
        std::vector<std::string> argv = {binary("ds4-gguf-gen"), "--arch", "glm-dsa", "-o", path, "--seed", "7",
                                         "--indexer-ln-eps", "0", "-q"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        const RunResult r = run_command(argv);
        EXPECT_EQ(r.exit_code, 0) << r.output;
        return path;
    }

    // Runs ds4-oracle once per name (later calls return the first result): its logits.
    static const Logits& oracle(const std::string& name, const std::string& model, std::vector<std::string> extra) {
        auto it = runs_->find(name);
        if (it != runs_->end()) return it->second;
        const std::string out = dir_->file(name + ".f32");
        std::vector<std::string> argv = {binary("ds4-oracle"), "-m", model, "--token-ids", tokens_, "--out", out,
                                         "--threads", "1"};
        argv.insert(argv.end(), extra.begin(), extra.end());
        const RunResult r = run_command(argv);
        EXPECT_EQ(r.exit_code, 0) << r.output;
        return (*runs_)[name] = r.exit_code == 0 ? load_logits(out, kVocab) : Logits{};
    }
    static const Logits& prefill() { return oracle("prefill", model_, {}); }
    static const std::string& mtp_model() {
        static const std::string path = generate("tiny-mtp.gguf", {"--mtp"});
        return path;
    }

    static TempDir* dir_;
    static std::map<std::string, Logits>* runs_;
    static std::string model_;
    static std::string tokens_;
};

TempDir* GlmOracle::dir_ = nullptr;
std::map<std::string, Logits>* GlmOracle::runs_ = nullptr;
std::string GlmOracle::model_;
std::string GlmOracle::tokens_;

TEST_F(GlmOracle, PrefillDecodeAndChunkedAgree) {
    const Logits& decode = oracle("decode", model_, {"--mode", "decode"});
    const Logits& chunked = oracle("chunked", model_, {"--mode", "chunked", "--chunk", "5"});
    ASSERT_EQ(prefill().n_tokens, kTokens);
    ASSERT_EQ(decode.n_tokens, kTokens);
    ASSERT_EQ(chunked.n_tokens, kTokens);
    const CompareSummary pd = compare_logits(prefill(), decode, kRelTol);
    const CompareSummary pc = compare_logits(prefill(), chunked, kRelTol);
    std::cout << "prefill vs decode:  " << describe(pd) << "\nprefill vs chunk 5: " << describe(pc) << '\n';
    EXPECT_LE(pd.worst_rel_err, kRelTol);
    EXPECT_EQ(pd.top1_agreement, 1.0);
    EXPECT_LE(pc.worst_rel_err, kRelTol);
    EXPECT_EQ(pc.top1_agreement, 1.0);
    // Not vacuous: the logits are spread out, and finite (a NaN never passes compare_logits).
    EXPECT_GT(pd.positions[kTokens - 1].ref_std, 0.1);
    EXPECT_TRUE(bit_identical(prefill(), oracle("again", model_, {})));
}

// Position p sees p + 1 keys and attends to the indexer's top 8 of them: positions below 8 see
// every key, so they match a model whose top-k covers the sequence; later positions do not.
TEST_F(GlmOracle, IndexerTopKIsActive) {
    const Logits& wide = oracle("wide", generate("tiny-k64.gguf", {"--indexer-top-k", "64"}), {});
    ASSERT_EQ(wide.n_tokens, kTokens);
    const CompareSummary s = compare_logits(prefill(), wide, kRelTol);
    for (int p = 0; p < kTokens; ++p) {
        if (p < kTopK)
            EXPECT_LE(s.positions[size_t(p)].max_abs_diff, 1e-5) << "position " << p;
        else
            EXPECT_GT(s.positions[size_t(p)].max_abs_diff, 1e-3) << "position " << p << ": the top-k changed nothing";
    }
}

TEST_F(GlmOracle, MtpBlockLeavesTheTrunkAndRunsAsLlamaCppsMtpContext) {
    // llama.cpp loads the file with the block (as the trunk's extra layer, skipped) and the
    // trunk's logits are those of the file without it.
    EXPECT_TRUE(bit_identical(prefill(), oracle("trunk_of_mtp", mtp_model(), {})));

    const std::string hidden = dir_->file("hidden.f32");
    const Logits& mtp = oracle("mtp", mtp_model(), {"--mode", "mtp", "--dump-hidden", hidden});
    const Logits& mtp5 = oracle("mtp5", mtp_model(), {"--mode", "mtp", "--chunk", "5"});
    ASSERT_EQ(mtp.n_tokens, kTokens);
    const CompareSummary c = compare_logits(mtp, mtp5, kRelTol);
    EXPECT_LE(c.worst_rel_err, kRelTol) << describe(c);
    EXPECT_EQ(c.top1_agreement, 1.0);
    // A head of its own: not the trunk's logits.
    const CompareSummary t = compare_logits(prefill(), mtp, kRelTol);
    EXPECT_GT(t.median_rel_err, 0.1);
    // The hidden state the head reads is the trunk's output-normed state: every row there,
    // n_embd wide, of RMS about 1 (output_norm's weights are 1 + 0.1 N).
    std::ifstream in(hidden, std::ios::binary | std::ios::ate);
    ASSERT_TRUE(in);
    ASSERT_EQ(static_cast<size_t>(in.tellg()), size_t(kTokens) * kEmbd * sizeof(float));
    in.seekg(0);
    std::vector<float> h(size_t(kTokens) * kEmbd);
    in.read(reinterpret_cast<char*>(h.data()), std::streamsize(h.size() * sizeof(float)));
    for (int p = 0; p < kTokens; ++p) {
        double ss = 0;
        for (int i = 0; i < kEmbd; ++i) ss += double(h[size_t(p) * kEmbd + i]) * h[size_t(p) * kEmbd + i];
        EXPECT_NEAR(std::sqrt(ss / kEmbd), 1.0, 0.15) << "row " << p;
    }
}

TEST_F(GlmOracle, ExpertDumpCoversTheRoutedLayers) {
    const std::string dump = dir_->file("experts.txt");
    EXPECT_TRUE(bit_identical(prefill(), oracle("captured", model_, {"--dump-experts", dump})));
    const RouteDump d = load_route_dump(dump);
    ASSERT_EQ(d.size(), size_t((kLayers - kDenseLead) * kTokens));
    std::set<int32_t> used;
    for (const auto& [key, ids] : d) {
        ASSERT_GE(key.first, kDenseLead) << "experts on a dense layer";
        ASSERT_EQ(ids.size(), size_t(kExpertsUsed));
        EXPECT_EQ(std::set<int32_t>(ids.begin(), ids.end()).size(), ids.size());
        for (int32_t id : ids) {
            ASSERT_GE(id, 0);
            ASSERT_LT(id, kExperts);
            used.insert(id);
        }
    }
    EXPECT_EQ(used.size(), size_t(kExperts));
}

// The indexer capture reads glm-dsa's nodes (capture.h): the logits stay bit-identical, and every
// full layer (0, 1, 3 of the tiny preset; shared layers 2 and 4 rename the picks tensor, which
// is filed under the full layer) has a line per position: every position <= p while p < top-k,
// then top-k distinct visible positions.
TEST_F(GlmOracle, IndexerDumpCoversTheFullLayers) {
    const std::string dump = dir_->file("indexer.txt");
    EXPECT_TRUE(bit_identical(prefill(), oracle("indexer_captured", model_, {"--dump-indexer", dump})));
    const RouteDump d = load_route_dump(dump);
    const std::set<int> full = {0, 1, 3};
    ASSERT_EQ(d.size(), full.size() * kTokens);
    for (const auto& [key, ids] : d) {
        const auto [layer, p] = key;
        ASSERT_TRUE(full.count(layer)) << "picks filed under layer " << layer;
        ASSERT_EQ(ids.size(), size_t(std::min<int64_t>(p + 1, kTopK))) << "layer " << layer << " pos " << p;
        EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
        EXPECT_EQ(std::set<int32_t>(ids.begin(), ids.end()).size(), ids.size());
        for (int32_t id : ids) {
            EXPECT_GE(id, 0);
            EXPECT_LE(id, p) << "a future position picked";
        }
    }
}

// llama.cpp's glm4 tokenizer over the generated vocabulary gives our ids (chat markers
// included), so the file is usable end to end; the vocabulary itself is glm_vocab.h's.
TEST_F(GlmOracle, GeneratedVocabularyTokenizesAsLlamaCpp) {
    const std::vector<std::string> strings = {
        "Hello world",
        " the thinking of the model",
        "[gMASK]<sop><|system|>\nYou are a tool user.<|user|>\nWhat is 1000 + 2?<|assistant|>\n<think>",
        "</think>The answer is 1002.<|endoftext|>",
        "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>",
        "<|observation|><tool_response>{\"t\": 20}</tool_response>",
        "def function():\n    return model\n\n",
        "  spaces   and\ttabs\r\n",
        "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82",
        "12345678 is a number, 3.14 another",
        "/nothink<|begin_of_box|>x<|end_of_box|>",
    };
    const std::string in = dir_->file("strings.bin"), out = dir_->file("ids.txt");
    {
        std::ofstream f(in, std::ios::binary);
        for (const auto& s : strings) {
            const uint32_t n = uint32_t(s.size());
            const unsigned char len[4] = {uint8_t(n), uint8_t(n >> 8), uint8_t(n >> 16), uint8_t(n >> 24)};
            f.write(reinterpret_cast<const char*>(len), 4);
            f.write(s.data(), std::streamsize(n));
        }
    }
    const RunResult r =
        run_command({binary("ds4-oracle"), "-m", model_, "--tokenize", in, "--out", out, "--parse-special"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::ifstream ids_in(out);
    std::vector<std::vector<int32_t>> llama;
    for (std::string line; std::getline(ids_in, line);) {
        std::istringstream ls(line);
        llama.emplace_back();
        for (int32_t id; ls >> id;) llama.back().push_back(id);
    }
    ASSERT_EQ(llama.size(), strings.size());
    auto f = gguf::File::open(model_);
    const auto tok = tokenizer::Tokenizer::from_gguf(*f);
    for (size_t i = 0; i < strings.size(); ++i)
        EXPECT_EQ(tok->encode(strings[i], tokenizer::Special::Match), llama[i]) << "string " << i << ": " << strings[i];
}

}  // namespace
}  // namespace ds4::oracle
