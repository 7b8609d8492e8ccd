// ds4-eval's split-screen UI in a real terminal (tmux; skipped without it), on the tiny model
// with scripted replies: the case list and the status line show, p pauses between cases,
// Down/Enter runs a later case next, q stops with the report, and the report is printed on the
// normal screen once the UI has left.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/file_io.h"
#include "support/tiny_model.h"
#include "support/tmux.h"
#include "support/tool_run.h"

namespace ds4::test {
namespace {

class EvalTmux : public ::testing::Test {
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
    void SetUp() override {
        if (sh("command -v tmux").empty()) GTEST_SKIP() << "tmux is not installed";
    }
    std::string eval(const std::vector<std::string>& replies, const std::string& extra) {
        const std::string script = scratch_.file("replies.json");
        std::ofstream(script) << nlohmann::json(replies).dump();
        return quote(binary("ds4-eval")) + " -m " + quote(model_) + " --threads 2 --nothink -n 32 --script-replies " +
               quote(script) + " " + extra;
    }

    static TempDir* dir_;
    static std::string model_;
    TempDir scratch_;
};
TempDir* EvalTmux::dir_ = nullptr;
std::string EvalTmux::model_;

TEST_F(EvalTmux, PauseReorderAndReport) {
    const std::string trace = scratch_.file("t.trace");
    // Run order: case 1, then case 3 (picked with Down Down Enter), then case 2.
    Tmux t(eval({"Answer: 215", "Answer: 450", "Answer: 1830"},
                "--suite arith --questions 3 --pause-ms 1500 --trace " + quote(trace)));
    ASSERT_TRUE(t.expect("passed 1/1 of 3", 60s)) << t.screen();  // the title line
    std::string s = t.screen();
    EXPECT_NE(s.find(">   1 PASSED  arith/arith-journey 215/215"), std::string::npos) << s;
    EXPECT_NE(s.find("arith/arith-pencils"), std::string::npos) << s;
    EXPECT_NE(s.find("Answer: 215"), std::string::npos) << s;  // the reply, on the right
    EXPECT_NE(s.find("p pause  q quit"), std::string::npos) << s;
    t.key("p");
    ASSERT_TRUE(t.expect("[paused]", 10s)) << t.screen();
    t.key("Down");
    t.key("Down");
    t.key("Enter");
    std::this_thread::sleep_for(2s);  // longer than --pause-ms: still paused
    s = t.screen();
    EXPECT_NE(s.find(">+  3 PENDING"), std::string::npos) << s;  // selected and queued, but paused
    EXPECT_NE(s.find("    2 PENDING"), std::string::npos) << s;
    t.key("p");
    // The UI leaves the alternate screen; the report is on the normal one, above where the
    // status line was.
    for (int i = 0; i < 600 && !t.dead(); ++i) std::this_thread::sleep_for(100ms);
    s = t.screen();
    ASSERT_NE(s.find("passed 3/3 (failed 0, stopped 0, errors 0, not run 0)"), std::string::npos) << s;
    const std::string tr = read_file(trace);
    EXPECT_LT(tr.find("===== CASE 3/3 arith/arith-pencils"), tr.find("===== CASE 2/3 arith/arith-sum-60")) << tr;
}

TEST_F(EvalTmux, QuitStopsWithTheReport) {
    Tmux t(eval({"Answer: 215", "Answer: 215", "Answer: 215"}, "--case-sequence 1,1,1 --pause-ms 5000"));
    ASSERT_TRUE(t.expect("passed 1/1 of 3", 60s)) << t.screen();
    t.key("q");
    ASSERT_TRUE(t.expect("passed 1/3 (failed 0, stopped 0, errors 0, not run 2)", 20s)) << t.screen();
    const std::string s = t.screen();
    EXPECT_TRUE(std::regex_search(s, std::regex("  2  arith/arith-journey +PENDING"))) << s;
}

}  // namespace
}  // namespace ds4::test
