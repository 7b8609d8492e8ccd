// llama.cpp loads what ds4-gguf-gen writes, for several shapes and quant mixes, and returns
// finite, non-degenerate logits (issue 2 acceptance). For the quantized mixes the test also
// prints the oracle's own prefill-vs-decode distance, the yardstick spec/ORACLE.md holds our
// engine to on quantized models.
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <ostream>
#include <string>
#include <vector>

#include "support/compare.h"
#include "support/tool_run.h"

namespace ds4::oracle {

using namespace ds4::test;  // the helpers of tests/support
namespace {

struct ModelCase {
    std::string name;
    std::vector<std::string> gen_args;  // ds4-gguf-gen arguments besides -o
    int vocab;                          // must match the preset / --vocab in gen_args
    bool decode_too;                    // also run one-token decode and report the distance
};

// Shapes: tiny (ratios 0,0,4,128,..., 4 heads x 96 with rope 32), a re-shaped tiny (head dim
// 128 with rope 64, ratios 4,128,4 with 1 hash layer, 16 experts with 4 used, window 8, top-k
// 8) and small (n_embd 512, 8 heads x 128, indexer 4 x 64). Mixes: F32, F16/BF16 dense, the
// published q2 recipe (Q8_0 + IQ2_XXS gate/up + Q2_K down), Q4_K experts, MXFP4 experts, Q8_0
// everywhere. The K/IQ cases are cut to few layers and experts: quantizing them is the slow
// part of the test.
std::vector<ModelCase> cases() {
    const std::vector<std::string> reshaped = {"--preset", "tiny", "--layers", "3", "--ratios", "4,128,4",
                                               "--hash-layers", "1", "--head-dim", "128", "--rope-dim", "64",
                                               "--experts", "16", "--experts-used", "4", "--window", "8",
                                               "--indexer-top-k", "8"};
    auto with = [](std::vector<std::string> a, std::initializer_list<std::string> more) {
        a.insert(a.end(), more);
        return a;
    };
    return {
        {"tiny_f32", {"--preset", "tiny", "--type", "all=f32"}, 512, false},
        {"tiny_f16_bf16_dense",
         {"--preset", "tiny", "--type", "dense=f16", "--type", "shared=bf16", "--type", "embd=f16", "--type",
          "output=bf16", "--type", "hc=f16", "--type", "router=bf16", "--type", "compressor=f16", "--type",
          "indexer=bf16"},
         512, true},
        {"tiny_q8_iq2xxs_q2k",
         {"--preset", "tiny", "--layers", "3", "--hash-layers", "1", "--experts", "4", "--type", "dense=q8_0",
          "--type", "shared=q8_0",
          "--type", "output=q8_0", "--type", "gate_up_exps=iq2_xxs", "--type", "down_exps=q2_k", "--type",
          "embd=f16", "--type", "hc=f16", "--type", "compressor=f16", "--type", "indexer=f16", "--type",
          "router=f16"},
         512, true},
        {"tiny_q4k_experts", {"--preset", "tiny", "--layers", "4", "--experts", "4", "--type", "exps=q4_k"}, 512, true},
        {"tiny_mxfp4_experts", {"--preset", "tiny", "--type", "exps=mxfp4", "--type", "dense=q8_0"}, 512, true},
        {"reshaped_f32", with(reshaped, {"--type", "all=f32"}), 512, false},
        {"reshaped_q8_0", with(reshaped, {"--type", "all=q8_0", "--type", "router=bf16"}), 512, true},
        {"small_q8_q4k",
         {"--preset", "small", "--layers", "2", "--ratios", "4,128", "--experts", "4", "--type", "dense=q8_0",
          "--type", "exps=q4_k"},
         4096, true},
    };
}

// Test names show the case name instead of the struct's bytes.
void PrintTo(const ModelCase& c, std::ostream* os) { *os << c.name; }

constexpr int kTokens = 64;

class OracleModels : public ::testing::TestWithParam<ModelCase> {};

TEST_P(OracleModels, LoadsAndReturnsFiniteLogits) {
    const ModelCase& c = GetParam();
    TempDir dir;
    const std::string model = dir.file("model.gguf");
    std::vector<std::string> gen = {binary("ds4-gguf-gen"), "-o", model, "--seed", "3", "-q"};
    gen.insert(gen.end(), c.gen_args.begin(), c.gen_args.end());
    const RunResult g = run_command(gen);
    ASSERT_EQ(g.exit_code, 0) << g.output;

    const std::string tokens = dir.file("tokens.txt");
    write_token_ids(tokens, random_token_ids(kTokens, c.vocab, 5));
    const std::string out = dir.file("prefill.f32");
    const RunResult r = run_command({binary("ds4-oracle"), "-m", model, "--token-ids", tokens, "--out", out,
                                     "--threads", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const Logits logits = load_logits(out, c.vocab);
    ASSERT_EQ(logits.n_tokens, kTokens);

    // Finite, spread out at every position, and different from position to position (the
    // model looks at its input).
    for (int64_t p = 0; p < logits.n_tokens; ++p) {
        const PositionStats self = compare_position(logits.row(p), logits.row(p), c.vocab);
        for (int64_t v = 0; v < c.vocab; ++v) ASSERT_TRUE(std::isfinite(logits.row(p)[v])) << "pos " << p << " id " << v;
        EXPECT_GT(self.ref_std, 1e-3) << "pos " << p;
        EXPECT_LT(self.ref_std, 1e3) << "pos " << p;
    }
    int64_t distinct_rows = 0;
    for (int64_t p = 1; p < logits.n_tokens; ++p) {
        distinct_rows += compare_position(logits.row(0), logits.row(p), c.vocab).max_abs_diff > 1e-3 ? 1 : 0;
    }
    EXPECT_EQ(distinct_rows, kTokens - 1);

    if (c.decode_too) {
        const std::string dec = dir.file("decode.f32");
        const RunResult d = run_command({binary("ds4-oracle"), "-m", model, "--token-ids", tokens, "--out", dec,
                                         "--mode", "decode", "--threads", "1"});
        ASSERT_EQ(d.exit_code, 0) << d.output;
        const CompareSummary s = compare_logits(logits, load_logits(dec, c.vocab), 1e-3);
        std::cout << c.name << " prefill vs decode: " << describe(s) << '\n';
        // Only the gross failure is an error here: spec/ORACLE.md measured that quantized models
        // legitimately drift apart once a routing decision flips.
        EXPECT_LT(s.median_rel_err, 1.0);
    }
}

INSTANTIATE_TEST_SUITE_P(Generated, OracleModels, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<ModelCase>& info) { return info.param.name; });

}  // namespace
}  // namespace ds4::oracle
