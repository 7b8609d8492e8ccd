// ds4-eval end to end on the tiny random model. Its replies are gibberish, so most runs script
// them (--script-replies: the reply's tokens are forced to the given text, the model still
// evaluates them): grading through the strict extractor, the report and JSON report, the trace
// and --regrade-trace, the hard, soft and natural closes of the reasoning; and one short real
// (sampled) run that must complete and report.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "common/file_io.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::test {
namespace {

class EvalTool : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new TempDir;
        model_ = dir_->file("tiny.gguf");
        auto args = kTinyQ8Io;
        args.insert(args.end(), {"--seed", "7", "--ctx", "8192"});
        const auto r = write_tiny_model(model_, args);
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    std::string script(const std::vector<std::string>& replies) {
        const std::string p = scratch_.file("replies" + std::to_string(n_++) + ".json");
        std::ofstream(p) << nlohmann::json(replies).dump();
        return p;
    }
    RunResult eval(std::vector<std::string> args) {
        std::vector<std::string> argv = {binary("ds4-eval"), "-m", model_, "--threads", "2", "--plain"};
        argv.insert(argv.end(), args.begin(), args.end());
        return run_command(argv);
    }
    // The value of "key: " in the trace's case number `n` (1-based, in file order).
    static std::string field(const std::string& trace, int n, const std::string& key) {
        size_t at = 0;
        for (int i = 0; i < n; ++i) at = trace.find("===== CASE ", at + 1);
        const size_t k = trace.find("\n" + key + ": ", at);
        if (at == std::string::npos || k == std::string::npos) return "<none>";
        const size_t from = k + key.size() + 3;
        return trace.substr(from, trace.find('\n', from) - from);
    }

    static TempDir* dir_;
    static std::string model_;
    TempDir scratch_;
    int n_ = 0;
};
TempDir* EvalTool::dir_ = nullptr;
std::string EvalTool::model_;

TEST_F(EvalTool, ScriptedRepliesAreGradedReportedTracedAndRegraded) {
    const std::string trace = scratch_.file("run.trace"), json = scratch_.file("report.json");
    // arith suite: journey 215, sum-60 1830, pencils 450.
    const auto r = eval({"--nothink", "--suite", "arith", "--questions", "3", "-n", "64", "--trace", trace, "--json-report",
                         json, "--script-replies",
                         script({"From 09:40 to 13:15.\nAnswer: 215", "Answer: 1830\nor so", "Answer: 451"})});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("-> PASSED given 215, correct 215"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("-> FAILED given ?, correct 1830"), std::string::npos) << r.output;  // not the final line
    EXPECT_NE(r.output.find("-> FAILED given 451, correct 450"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("passed 1/3 (failed 2, stopped 0, errors 0, not run 0)"), std::string::npos) << r.output;
    const auto j = nlohmann::json::parse(read_file(json));
    ASSERT_EQ(j["cases"].size(), 3u);
    EXPECT_EQ(j["cases"][0]["id"], "arith-journey");
    EXPECT_EQ(j["cases"][0]["status"], "PASSED");
    EXPECT_GT(j["cases"][0]["prompt_tokens"].get<int>(), 20);
    EXPECT_GT(j["cases"][0]["generated_tokens"].get<int>(), 3);
    EXPECT_EQ(j["cases"][0]["stop"], "forced_end");
    EXPECT_EQ(j["totals"]["passed"], 1);

    const std::string t = read_file(trace);
    EXPECT_EQ(field(t, 1, "status"), "PASSED");
    EXPECT_EQ(field(t, 3, "picked"), "451");
    EXPECT_EQ(field(t, 1, "thinking"), "no");
    const std::string reply = "From 09:40 to 13:15.\nAnswer: 215";
    EXPECT_NE(t.find("MODEL_OUTPUT_BEGIN bytes=" + std::to_string(reply.size()) + "\n" + reply + "\nMODEL_OUTPUT_END"),
              std::string::npos);

    auto g = run_command({binary("ds4-eval"), "--regrade-trace", trace});
    ASSERT_EQ(g.exit_code, 0) << g.output;
    EXPECT_NE(g.output.find("regraded 3 cases: passed=1 failed=2 changed=0 not_graded=0"), std::string::npos) << g.output;
    // A corrected key (a case file of the same suite/id) shows as a change.
    const std::string cases = scratch_.file("fixed.jsonl");
    std::ofstream(cases) << R"({"id":"arith-pencils","suite":"arith","prompt":"p","kind":"integer","expected":"451"})" << "\n";
    g = run_command({binary("ds4-eval"), "--cases", cases, "--regrade-trace", trace});
    ASSERT_EQ(g.exit_code, 0) << g.output;
    EXPECT_NE(g.output.find("arith/arith-pencils: trace FAILED picked=451 -> regrade PASSED"), std::string::npos) << g.output;
    EXPECT_NE(g.output.find("passed=2 failed=1 changed=1"), std::string::npos) << g.output;
}

TEST_F(EvalTool, ThinkingBudgetsCloseTheReasoning) {
    std::string long_reasoning;
    for (int i = 0; i < 120; ++i) long_reasoning += "step ";
    const std::string trace = scratch_.file("budget.trace");
    // Case 1 (natural): closes by itself. Case 2 (hard): -n 48 with a hard budget of 12 forces
    // </think> after 36 reasoning tokens; the script's answer follows. Both pass.
    auto r = eval({"--suite", "code", "--case-sequence", "1,1", "-n", "48", "--hard-limit-reply-budget", "12",
                   "--soft-limit-reply-budget", "12", "--trace", trace, "--script-replies",
                   script({"short</think>\nAnswer: 25", long_reasoning + "</think>\nAnswer: 25"})});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    std::string t = read_file(trace);
    EXPECT_EQ(field(t, 1, "thinking"), "yes");
    EXPECT_EQ(field(t, 1, "think_close"), "natural");
    EXPECT_EQ(field(t, 1, "status"), "PASSED");
    EXPECT_EQ(field(t, 2, "think_close"), "hard_forced");
    EXPECT_EQ(field(t, 2, "think_close_token_index"), "36");
    EXPECT_EQ(field(t, 2, "think_close_remaining_budget"), "12");
    EXPECT_EQ(field(t, 2, "status"), "PASSED");
    const int generated = std::stoi(field(t, 2, "generated_tokens"));
    EXPECT_GT(generated, 37);  // 36 reasoning, the forced </think>, the answer
    EXPECT_LE(generated, 48);

    // Soft: with every rank accepted, the reasoning closes at the first token inside the soft
    // budget (-n 48, soft 40: after 8 tokens).
    r = eval({"--suite", "code", "--questions", "1", "-n", "48", "--hard-limit-reply-budget", "4",
              "--soft-limit-reply-budget", "40", "--soft-limit-think-close-rank", "100000000", "--trace", trace,
              "--script-replies", script({long_reasoning + "</think>\nAnswer: 25"})});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    t = read_file(trace);
    EXPECT_EQ(field(t, 1, "think_close"), "soft_forced");
    EXPECT_EQ(field(t, 1, "think_close_token_index"), "8");
    EXPECT_EQ(field(t, 1, "think_close_remaining_budget"), "40");
    EXPECT_GT(std::stoi(field(t, 1, "think_close_rank")), 0);
    EXPECT_EQ(field(t, 1, "status"), "PASSED");

    // Without a close the reply has no answer.
    r = eval({"--suite", "code", "--questions", "1", "-n", "48", "--hard-limit-reply-budget", "12", "--trace", trace,
              "--script-replies", script({"Answer: 25"})});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    t = read_file(trace);
    EXPECT_EQ(field(t, 1, "think_close"), "none");
    EXPECT_EQ(field(t, 1, "status"), "FAILED");
}

TEST_F(EvalTool, ARealShortRunCompletesAndReports) {
    // No --plain: output that is not a terminal gets the plain lines by itself.
    const auto r = run_command({binary("ds4-eval"), "-m", model_, "--threads", "2", "--nothink", "--questions", "2", "-n", "6",
                                "--temp", "0"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("[2/2] logic/logic-shortest"), std::string::npos) << r.output;
    const std::regex total(R"(passed \d/2 \(failed \d, stopped 0, errors 0, not run 0\); \d+ prompt tokens, (\d+) generated tokens)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(r.output, m, total)) << r.output;
    EXPECT_GT(std::stoi(m[1].str()), 0);
    EXPECT_LE(std::stoi(m[1].str()), 12);
}

TEST_F(EvalTool, FlagsAndCaseCommands) {
    auto r = run_command({binary("ds4-eval"), "--self-test-extractors"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("self-tests passed"), std::string::npos);
    r = run_command({binary("ds4-eval"), "--suite", "logic", "--case-sequence", "2,1", "--list-cases"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_LT(r.output.find("logic/logic-clubs"), r.output.find("logic/logic-shortest")) << r.output;
    r = run_command({binary("ds4-eval"), "--dump-cases", "--questions", "2"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const std::string dumped = scratch_.file("dump.jsonl");
    write_file(dumped, r.output);
    r = run_command({binary("ds4-eval"), "--cases", dumped, "--validate-cases"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("2 valid cases"), std::string::npos) << r.output;
    r = run_command({binary("ds4-eval"), "-n", "100", "--hard-limit-reply-budget", "100"});
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.output.find("must be smaller than -n"), std::string::npos) << r.output;
    r = run_command({binary("ds4-eval"), "--power", "0", "--list-cases"});
    EXPECT_NE(r.exit_code, 0);
    EXPECT_NE(r.output.find("--power"), std::string::npos) << r.output;
    r = run_command({binary("ds4-eval"), "--case-sequence", "99", "--list-cases"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.output.find("--case-sequence"), std::string::npos) << r.output;
    r = run_command({binary("ds4-eval"), "--help"});
    EXPECT_EQ(r.exit_code, 0);
    for (const char* flag : {"--questions", "--case-sequence", "--trace", "--regrade-trace", "--soft-limit-reply-budget",
                             "--hard-limit-reply-budget", "--plain", "--self-test-extractors", "--cases", "--ssd-streaming",
                             "--mtp", "--threads", "--json-report", "--power", "--warm-weights", "--dir-steering-file"})
        EXPECT_NE(r.output.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace ds4::test
