// The forward pass against the llama.cpp oracle (issue: "the DeepSeek V4 forward pass on CPU").
// F32 weights, F32 KV, flash attention off, QAT simulation off: the two implementations must
// agree to 1e-3 x the logit standard deviation at every position, with identical top-1,
// identical chosen experts and identical indexer rows. Shapes exercise every cache: a sliding
// raw window, ratio-4 layers whose indexer has to choose (top-k below the visible rows), and
// ratio-128 layers that emit several rows.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "model/deepseek4/model.h"
#include "model/session.h"
#include "support/compare.h"
#include "support/route_dump.h"
#include "support/tool_run.h"

namespace ds4::oracle {

using namespace ds4::test;  // the helpers of tests/support
namespace {

struct Shape {
    const char* name;
    std::vector<std::string> gen_args;  // ds4-gguf-gen flags on top of --preset <preset>
    const char* preset = "tiny";
};

std::string make_model(const TempDir& dir, const Shape& s) {
    const std::string path = dir.file(std::string(s.name) + ".gguf");
    std::vector<std::string> argv = {binary("ds4-gguf-gen"), "-q", "-o", path, "--preset", s.preset};
    argv.insert(argv.end(), s.gen_args.begin(), s.gen_args.end());
    const RunResult r = run_command(argv);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return path;
}

// Our engine's logits for every position, and its decisions in the oracle's dump format.
Logits run_ours(const std::string& path, const std::vector<int32_t>& ids, int64_t chunk,
                RouteDump* experts, RouteDump* indexer) {
    auto model = deepseek4::Model::load(path, {.threads = 2});
    model::Session s(*model, {.ctx = int64_t(ids.size()) + 8, .prefill_chunk = chunk, .qat = false});
    model::DecisionLog log;
    s.set_decision_log(&log);
    Logits out;
    out.n_vocab = model->config().n_vocab;
    out.n_tokens = int64_t(ids.size());
    s.eval(ids, &out.values, /*all_logits=*/true);
    for (size_t p = 0; p < log.experts.size(); ++p)
        for (size_t l = 0; l < log.experts[p].size(); ++l)
            if (experts) (*experts)[{int(l), int64_t(p)}] = log.experts[p][l];
    for (size_t p = 0; p < log.indexer.size(); ++p)
        for (size_t l = 0; l < log.indexer[p].size(); ++l)
            if (indexer && !log.indexer[p][l].empty()) (*indexer)[{int(l), int64_t(p)}] = log.indexer[p][l];
    return out;
}

Logits run_oracle(const TempDir& dir, const std::string& model, const std::string& ids_file,
                  int64_t n_vocab, RouteDump* experts, RouteDump* indexer) {
    const std::string out = dir.file("oracle.f32"), ex = dir.file("oracle.experts"),
                      ix = dir.file("oracle.indexer");
    const RunResult r = run_command({binary("ds4-oracle"), "-m", model, "--token-ids", ids_file,
                                     "--out", out, "--mode", "prefill", "--threads", "1",
                                     "--dump-experts", ex, "--dump-indexer", ix});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    *experts = load_route_dump(ex);
    *indexer = load_route_dump(ix);
    return load_logits(out, n_vocab);
}

// Readable test names in CTest (gtest would print the parameter's bytes).
void PrintTo(const Shape& v, std::ostream* os) { *os << v.name; }

class ModelOracle : public ::testing::TestWithParam<Shape> {};

TEST_P(ModelOracle, F32LogitsExpertsAndIndexerMatch) {
    TempDir dir;
    const std::string path = make_model(dir, GetParam());
    const int64_t n_vocab = deepseek4::Model::load(path)->config().n_vocab;
    const std::vector<int32_t> ids = random_token_ids(600, n_vocab, 42);
    write_token_ids(dir.file("ids.txt"), ids);

    RouteDump ref_experts, ref_indexer, our_experts, our_indexer;
    const Logits ref = run_oracle(dir, path, dir.file("ids.txt"), n_vocab, &ref_experts, &ref_indexer);
    const Logits ours = run_ours(path, ids, 64, &our_experts, &our_indexer);
    const CompareSummary s = compare_logits(ref, ours, 1e-3);
    SCOPED_TRACE(describe(s));
    if (std::getenv("DS4_DEBUG_POSITIONS"))
        for (size_t i = 0; i < s.positions.size(); ++i)
            std::printf("pos %zu rel %.3g top1 %d/%d\n", i, s.positions[i].rel_err,
                        s.positions[i].ref_top1, s.positions[i].test_top1);
    EXPECT_EQ(s.first_divergence, -1) << describe(s);
    EXPECT_LE(s.worst_rel_err, 1e-3);
    EXPECT_EQ(s.top1_agreement, 1.0);

    const RouteDiff de = compare_routes(ref_experts, our_experts);
    EXPECT_GT(de.n_compared, 0);
    EXPECT_EQ(de.n_differ, 0) << "first at layer " << de.first_differ.first << " pos " << de.first_differ.second;
    const RouteDiff di = compare_routes(ref_indexer, our_indexer);
    EXPECT_GT(our_indexer.size(), 0u) << "the indexer never had to choose: shape too small";
    EXPECT_EQ(di.n_differ, 0) << "first at layer " << di.first_differ.first << " pos " << di.first_differ.second;
    std::printf("[%s] %s; experts %lld compared; indexer %lld compared\n", GetParam().name,
                describe(s).c_str(), (long long)de.n_compared, (long long)di.n_compared);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, ModelOracle,
    ::testing::Values(
        Shape{"tiny", {"--indexer-heads", "16"}},
        Shape{"wide_heads", {"--layers", "5", "--ratios", "4,128,0,4,128", "--hash-layers", "1",
                             "--heads", "8", "--head-dim", "80", "--rope-dim", "16",
                             "--o-groups", "4", "--window", "32", "--indexer-top-k", "8", "--indexer-heads", "16",
                             "--seed", "7"}},
        Shape{"deep_small_window", {"--layers", "7", "--ratios", "0,4,4,128,0,128,4",
                                    "--hash-layers", "2", "--window", "8", "--experts", "16",
                                    "--experts-used", "4", "--indexer-heads", "16",
                                    "--indexer-top-k", "16", "--seed", "3"}},
        // PRO reduced (spec/ARCHITECTURE.md §1.3): the preset's own pattern truncated to 5
        // layers (ratios 128,128,4,128,4: hash-routed ratio-128 layers, no ratio-0 layer, so
        // every layer runs compressed RoPE + YaRN), routed scale 2.5, 6 of 12 experts (PRO
        // uses 6 of 384), 8 heads per output group, indexer top-k twice the tiny one; widths
        // cut like tiny's (head_dim 96 != indexer_dim 64 for llama.cpp), all F32.
        Shape{"pro_reduced", {"--layers", "5", "--embd", "256", "--vocab", "512", "--heads", "16",
                              "--head-dim", "96", "--rope-dim", "32", "--q-rank", "96",
                              "--o-rank", "64", "--o-groups", "2", "--experts", "12",
                              "--ff", "96", "--window", "16", "--indexer-heads", "16",
                              "--indexer-dim", "64", "--indexer-top-k", "8", "--ctx", "4096",
                              "--type", "all=f32", "--seed", "11"},
              "pro"}),
    [](const ::testing::TestParamInfo<Shape>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace ds4::oracle
