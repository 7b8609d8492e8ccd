// ds4-score on the tiny real-vocabulary model: the score file's rows, the same numbers run to
// run and whatever the thread count, the comparison of two files, and the manifest errors.
#include <gtest/gtest.h>

#include <filesystem>
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

// Upstream's manifest.tsv as it is: a "# " comment header, paths from upstream's repository
// root (found next to the manifest less their leading folders), the context as a fourth
// argument. The scores equal those of our own manifest format over the same files.
TEST(ScoreTool, ReadsUpstreamsManifestAsItIs) {
    test::TempDir dir;
    ASSERT_EQ(test::write_tiny_model(dir.file("m.gguf"), test::kTinyQ8Io).exit_code, 0);
    std::filesystem::create_directories(dir.path() / "prompts");
    std::filesystem::create_directories(dir.path() / "continuations");
    std::ofstream(dir.file("prompts/case_000.txt")) << "Explain B-tree insertion.";
    std::ofstream(dir.file("continuations/case_000.txt")) << "To insert a key, find the leaf first.";
    std::ofstream(dir.file("prompts/case_001.txt")) << "What is backpressure?";
    std::ofstream(dir.file("continuations/case_001.txt")) << "Backpressure slows a fast producer down.";
    const std::string up = "gguf-tools/quality-testing/data/flash/";
    std::ofstream(dir.file("upstream.tsv"))
        << "# id\tprompt_file\tcontinuation_file\tresponse_file\n"
        << "case_000\t" << up << "prompts/case_000.txt\t" << up << "continuations/case_000.txt\t" << up << "responses/case_000.json\n"
        << "case_001\t" << up << "prompts/case_001.txt\t" << up << "continuations/case_001.txt\t" << up << "responses/case_001.json\n";
    std::ofstream(dir.file("ours.tsv")) << "id\tprompt_file\tcontinuation_file\n"
                                        << "case_000\tprompts/case_000.txt\tcontinuations/case_000.txt\n"
                                        << "case_001\tprompts/case_001.txt\tcontinuations/case_001.txt\n";
    const std::string score = test::binary("ds4-score");
    auto r = run_command({score, dir.file("m.gguf"), dir.file("upstream.tsv"), dir.file("a.tsv"), "256", "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    r = run_command({score, dir.file("m.gguf"), dir.file("ours.tsv"), dir.file("b.tsv"), "--ctx", "256", "-t", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string a = text_of(dir.file("a.tsv"));
    EXPECT_NE(a.find("\ncase_000\t"), std::string::npos) << a;
    EXPECT_NE(a.find("\ncase_001\t"), std::string::npos) << a;
    EXPECT_EQ(a, text_of(dir.file("b.tsv")));

    r = run_command({score, dir.file("m.gguf"), dir.file("ours.tsv"), dir.file("c.tsv"), "lots"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("CTX 'lots' is not a context size"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ds4
