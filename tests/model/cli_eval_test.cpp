// The ds4 command-line contract for evaluation: `ds4 -m MODEL --token-ids FILE
// --dump-logits-f32 OUT` writes exactly the logits the library computes, for any
// --prefill-chunk, and bad input gives a one-line error with a non-zero exit.
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "model/deepseek4/model.h"
#include "model/session.h"
#include "support/compare.h"
#include "support/tool_run.h"

namespace ds4::deepseek4 {
namespace {

TEST(CliEval, DumpedLogitsEqualTheLibrarysForEveryChunkSize) {
    test::TempDir dir;
    const std::string model = dir.file("tiny.gguf");
    ASSERT_EQ(test::run_command({test::binary("ds4-gguf-gen"), "-q", "-o", model, "--preset",
                                   "tiny", "--seed", "4"}).exit_code, 0);
    auto m = Model::load(model);
    const int64_t V = m->config().n_vocab;
    const auto ids = test::random_token_ids(40, V, 3);
    test::write_token_ids(dir.file("ids.txt"), ids);

    model::Session s(*m, {.ctx = 64, .prefill_chunk = 40, .qat = false});
    std::vector<float> expected;
    s.eval(ids, &expected, /*all_logits=*/true);

    for (const char* chunk : {"1", "7", "64"}) {
        const std::string out = dir.file(std::string("logits-") + chunk + ".f32");
        const auto r = test::run_command({test::binary("ds4"), "-m", model, "--token-ids",
                                            dir.file("ids.txt"), "--dump-logits-f32", out,
                                            "--prefill-chunk", chunk, "--no-qat", "--threads", "2",
                                            "--ctx", "64"});
        ASSERT_EQ(r.exit_code, 0) << r.output;
        const test::Logits got = test::load_logits(out, V);
        ASSERT_EQ(got.n_tokens, int64_t(ids.size()));
        const auto cmp = test::compare_logits({V, got.n_tokens, expected}, got, 1e-6);
        EXPECT_EQ(cmp.first_divergence, -1) << "chunk " << chunk << ": " << test::describe(cmp);
    }
    // QAT is on by default and changes the numbers.
    const std::string qat = dir.file("qat.f32");
    ASSERT_EQ(test::run_command({test::binary("ds4"), "-m", model, "--token-ids",
                                   dir.file("ids.txt"), "--dump-logits-f32", qat}).exit_code, 0);
    EXPECT_NE(test::load_logits(qat, V).values, expected);
}

TEST(CliEval, GreedyContinuationAndErrors) {
    test::TempDir dir;
    const std::string model = dir.file("tiny.gguf");
    ASSERT_EQ(test::run_command({test::binary("ds4-gguf-gen"), "-q", "-o", model, "--preset",
                                   "tiny"}).exit_code, 0);
    test::write_token_ids(dir.file("ids.txt"), {1, 2, 3});
    const auto ok = test::run_command({test::binary("ds4"), "-m", model, "--token-ids",
                                         dir.file("ids.txt"), "-n", "5"});
    ASSERT_EQ(ok.exit_code, 0) << ok.output;
    EXPECT_NE(ok.output.find("prefill:"), std::string::npos) << ok.output;

    std::ofstream(dir.file("bad.txt")) << "1 2 99999\n";
    const auto bad = test::run_command({test::binary("ds4"), "-m", model, "--token-ids",
                                          dir.file("bad.txt")});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.output.find("token id 99999 out of range"), std::string::npos) << bad.output;
    const auto missing = test::run_command({test::binary("ds4"), "-m", dir.file("none.gguf"),
                                              "--token-ids", dir.file("ids.txt")});
    EXPECT_EQ(missing.exit_code, 1);
    EXPECT_NE(missing.output.find("none.gguf"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace ds4::deepseek4
