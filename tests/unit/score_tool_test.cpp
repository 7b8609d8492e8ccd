// ds4-score on the tiny real-vocabulary model: the score file's rows, the same numbers run to
// run and whatever the thread count, the comparison of two files, and the manifest errors.
#include <gtest/gtest.h>

#include <fstream>

#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

using test::run_command;

std::string text_of(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

TEST(ScoreTool, ScoresAreReproducibleAndCompare) {
    test::TempDir dir;
    ASSERT_EQ(test::write_tiny_model(dir.file("m.gguf"), test::kTinyQ8Io).exit_code, 0);
    std::ofstream(dir.file("p1.txt")) << "What is the capital of France?";
    std::ofstream(dir.file("c1.txt")) << "The capital of France is Paris.";
    std::ofstream(dir.file("p2.txt")) << "Write a haiku about rain.";
    std::ofstream(dir.file("c2.txt")) << "Soft rain on the roof,\nquiet drums in the dark night.";
    std::ofstream(dir.file("man.tsv")) << "id\tprompt_file\tcontinuation_file\tnote\ncapital\tp1.txt\tc1.txt\tx\n"
                                          "haiku\tp2.txt\tc2.txt\ty\n";
    const std::string score = test::binary("ds4-score");
    auto r = run_command({score, dir.file("m.gguf"), dir.file("man.tsv"), dir.file("a.tsv"), "--ctx", "256", "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("cases 2  avg_nll"), std::string::npos) << r.output;
    const std::string a = text_of(dir.file("a.tsv"));
    EXPECT_EQ(a.rfind("id\ttokens\tavg_nll\tfirst_token_match\tgreedy_lcp\ttop1_rate\ncapital\t", 0), 0u) << a;
    EXPECT_NE(a.find("\nhaiku\t"), std::string::npos) << a;
    // Same numbers, digit for digit, with another thread count.
    r = run_command({score, "-m", dir.file("m.gguf"), dir.file("man.tsv"), dir.file("b.tsv"), "--ctx", "256", "-t", "1"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(text_of(dir.file("b.tsv")), a);

    r = run_command({score, "--compare", dir.file("a.tsv"), dir.file("b.tsv")});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("case_wins_B_A_ties 0/0/2"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("verdict: no clear difference"), std::string::npos) << r.output;

    // A case whose continuation file is missing: the error names it.
    std::ofstream(dir.file("bad.tsv")) << "id\tprompt_file\tcontinuation_file\nz\tp1.txt\tnope.txt\n";
    r = run_command({score, dir.file("m.gguf"), dir.file("bad.tsv"), dir.file("c.tsv"), "--ctx", "256"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("nope.txt"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ds4
