// ds4-agent in a real terminal: tmux runs it, the test types (send-keys) and reads the screen
// (capture-pane), as a user would. The model is the tiny random one, so its replies are
// scripted (--script-replies: the sampled tokens are forced to the given text, tool-call
// blocks included, and the model still evaluates them). Covered: each tool, the permission
// prompt answered no then yes, a tool error, hostile arguments (a path out of the root, a
// command that never ends), Ctrl+C mid-reply with the session still consistent, a session
// saved, listed, switched and resumed without prefill, stripped and deleted; and the
// one-shot mode with --trace.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "chat/message.h"
#include "chat/glm_render.h"
#include "chat/render.h"
#include "support/tiny_model.h"
#include "support/tmux.h"
#include "support/tool_run.h"

namespace ds4::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

using test::quote;
using test::sh;
using test::Tmux;

std::string call(const std::string& name, const nlohmann::json& args) {
    return chat::render_tool_calls({{"", name, args.dump()}});
}

class AgentTmux : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("tiny.gguf");
        auto args = test::kTinyQ8Io;
        args.insert(args.end(), {"--seed", "5", "--ctx", "8192"});
        const auto r = test::write_tiny_model(model_, args);
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    void SetUp() override {
        if (sh("command -v tmux").empty()) GTEST_SKIP() << "tmux is not installed";
        work_ = scratch_.path() / "work";
        fs::create_directories(work_);
        fs::create_directories(scratch_.path() / "home");
        std::ofstream(work_ / "notes.txt") << "alpha\nbeta\n";
        std::ofstream(scratch_.path() / "secret.txt") << "TOPSECRET\n";
    }
    // The agent's command line with `replies` scripted.
    std::string agent(const std::vector<std::string>& replies, const std::string& extra = "", bool think = false) {
        const std::string script = scratch_.path() / "replies.json";
        std::ofstream(script) << nlohmann::json(replies).dump();
        return "HOME=" + quote((scratch_.path() / "home").string()) + " " + quote(test::binary("ds4-agent")) +
               " -m " + quote(model_) + " --threads 2 -c 4096" + (think ? "" : " --nothink") + " --chdir " + quote(work_.string()) +
               " --session-dir " + quote((scratch_.path() / "sessions").string()) + " --script-replies " +
               quote(script) + " " + extra;
    }

    static test::TempDir* dir_;
    static std::string model_;
    test::TempDir scratch_;
    fs::path work_;
};
test::TempDir* AgentTmux::dir_ = nullptr;
std::string AgentTmux::model_;

TEST_F(AgentTmux, ToolsPermissionsErrorsAndHostileArguments) {
    Tmux t(agent({
        "I will read it." + call("read", {{"path", "notes.txt"}}),
        "It says alpha and beta.",
        call("write", {{"path", "out.txt"}, {"content", "hello\n"}}),
        call("write", {{"path", "out.txt"}, {"content", "hello\n"}}),
        call("edit", {{"path", "out.txt"}, {"old", "hello"}, {"new", "HELLO"}}),
        call("read", {{"path", "../secret.txt"}}),
        call("bash", {{"command", "sleep 1000"}, {"timeout_sec", 1}}),
        call("bash_stop", {{"id", 1}}),
        call("search", {{"pattern", "alp.a"}}),
        call("list", {}),
        "All done.",
    }));
    ASSERT_TRUE(t.expect("/help lists commands")) << t.screen();
    t.type("what is in notes.txt?");
    ASSERT_TRUE(t.expect("* read {\"path\": \"notes.txt\"}")) << t.screen();
    ASSERT_TRUE(t.expect("notes.txt: lines 1-2 (end of file)")) << t.screen();
    ASSERT_TRUE(t.expect("It says alpha and beta.")) << t.screen();
    ASSERT_TRUE(t.expect("1 tool calls]")) << t.screen();

    t.type("write hello to out.txt, then look around");
    ASSERT_TRUE(t.expect("allow write? write out.txt (6 bytes, new file) [y/N/a(lways)]")) << t.screen();
    t.type("n");
    ASSERT_TRUE(t.expect("error: the user did not allow")) << t.screen();
    EXPECT_FALSE(fs::exists(work_ / "out.txt"));
    ASSERT_TRUE(t.expect("allow write? write out.txt")) << t.screen();
    t.type("y");
    ASSERT_TRUE(t.expect("wrote out.txt (6 bytes, 1 lines)")) << t.screen();
    ASSERT_TRUE(t.expect("allow edit? edit out.txt: lines 1-1")) << t.screen();
    t.type("y");
    ASSERT_TRUE(t.expect("edited out.txt")) << t.screen();
    ASSERT_TRUE(t.expect("outside the working directory")) << t.screen();
    ASSERT_TRUE(t.expect("allow bash? run: sleep 1000")) << t.screen();
    t.type("y");
    ASSERT_TRUE(t.expect("still running after")) << t.screen();
    ASSERT_TRUE(t.expect("stopped job 1: exit code 137")) << t.screen();
    ASSERT_TRUE(t.expect("notes.txt:1: alpha")) << t.screen();
    ASSERT_TRUE(t.expect("notes.txt  (11 bytes)")) << t.screen();
    ASSERT_TRUE(t.expect("All done.")) << t.screen();
    ASSERT_TRUE(t.expect("8 tool calls]")) << t.screen();
    EXPECT_EQ(t.screen().find("TOPSECRET"), std::string::npos);
    std::ifstream in(work_ / "out.txt");
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "HELLO\n");
    t.type("/quit");
    for (int i = 0; i < 100 && !t.dead(); ++i) std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(t.dead());
}

TEST_F(AgentTmux, ProgressBarAndDimReasoning) {
    Tmux t(agent({"Pondering deeply.</think>The answer."}, "--prefill-chunk 128", true));
    ASSERT_TRUE(t.expect("/help lists commands")) << t.screen();
    const std::string raw = (scratch_.path() / "raw.txt").string();
    t.record(raw);
    t.type("think first");
    ASSERT_TRUE(t.expect("Pondering deeply.\nThe answer.")) << t.screen();
    ASSERT_TRUE(t.expect("tool calls]")) << t.screen();
    std::ifstream in(raw);
    const std::string bytes(std::istreambuf_iterator<char>(in), {});
    EXPECT_NE(bytes.find("prefill [#"), std::string::npos) << "a progress bar while the prompt is prefilled";
    EXPECT_TRUE(std::regex_search(bytes, std::regex(R"(\d+/\d+ tokens, \d+ t/s)"))) << bytes.substr(0, 2000);
    EXPECT_NE(bytes.find("\x1b[2mPondering deeply."), std::string::npos) << "reasoning is dimmed";
    EXPECT_NE(bytes.find("\x1b[0mThe answer."), std::string::npos) << "the answer is not";
}

TEST_F(AgentTmux, CtrlCStopsAReplyAndTheSessionGoesOn) {
    std::string long_reply;
    for (int i = 0; i < 4000; ++i) long_reply += "word ";
    Tmux t(agent({long_reply, "Short answer."}));
    ASSERT_TRUE(t.expect("/help lists commands")) << t.screen();
    t.type("talk a lot");
    ASSERT_TRUE(t.expect("word word word")) << t.screen();
    t.key("C-c");
    ASSERT_TRUE(t.expect("[stopped]")) << t.screen();
    std::smatch m;
    std::string s = t.rest();
    ASSERT_TRUE(t.expect("tool calls]")) << t.screen();
    const std::regex ctx(R"(\[context (\d+)/4096 tokens; prefilled (\d+), reused (\d+))");
    s = t.screen();
    ASSERT_TRUE(std::regex_search(s, m, ctx)) << s;
    const long held = std::stol(m[1]);
    EXPECT_LT(held, 3000) << "stopped well before the end of the reply";
    t.type("and now?");
    ASSERT_TRUE(t.expect("Short answer.")) << t.screen();
    ASSERT_TRUE(t.expect("tool calls]")) << t.screen();
    s = t.screen();
    std::vector<std::smatch> all;
    for (auto it = std::sregex_iterator(s.begin(), s.end(), ctx); it != std::sregex_iterator(); ++it) all.push_back(*it);
    ASSERT_EQ(all.size(), 2u) << s;
    // The stopped reply stays in the session: the next turn reuses all but its last token.
    EXPECT_GE(std::stol(all[1][3]), held - 1);
    t.key("C-d");
    for (int i = 0; i < 100 && !t.dead(); ++i) std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(t.dead()) << "Ctrl+D leaves";
}

TEST_F(AgentTmux, SessionsSaveListSwitchResumeWithoutPrefill) {
    Tmux t(agent({"First answer.", "Other answer.", "Resumed answer."}));
    ASSERT_TRUE(t.expect("/help lists commands")) << t.screen();
    t.type("remember the number 42");
    ASSERT_TRUE(t.expect("First answer.")) << t.screen();
    ASSERT_TRUE(t.expect("tool calls]")) << t.screen();
    t.type("/save");
    ASSERT_TRUE(t.expect("saved session ")) << t.screen();
    const std::string id = t.rest().substr(0, 12);
    ASSERT_EQ(id.size(), 12u);
    t.type("/new");
    ASSERT_TRUE(t.expect("new session")) << t.screen();
    t.type("something else");
    ASSERT_TRUE(t.expect("Other answer.")) << t.screen();
    ASSERT_TRUE(t.expect("tool calls]")) << t.screen();
    t.type("/list");
    ASSERT_TRUE(t.expect(id + "  ")) << t.screen();
    ASSERT_TRUE(t.expect("remember the number 42")) << t.screen();
    t.type("/switch " + id.substr(0, 5));
    ASSERT_TRUE(t.expect("switched to session " + id + " (")) << t.screen();
    const std::string rest = t.rest();
    const long held = std::stol(rest);
    ASSERT_TRUE(t.expect("KV state loaded: no prefill")) << t.screen();
    t.type("/history");
    ASSERT_TRUE(t.expect("[user] remember the number 42")) << t.screen();
    ASSERT_TRUE(t.expect("[assistant] First answer.")) << t.screen();
    t.type("what was the number?");
    ASSERT_TRUE(t.expect("Resumed answer.")) << t.screen();
    ASSERT_TRUE(t.expect("reused ")) << t.screen();
    EXPECT_EQ(std::stol(t.rest()), held) << "the whole saved session is reused: no prefill";
    t.type("/strip " + id);
    ASSERT_TRUE(t.expect("stripped session " + id)) << t.screen();
    t.type("/list");
    ASSERT_TRUE(t.expect("(stripped)")) << t.screen();
    t.type("/del " + id);
    ASSERT_TRUE(t.expect("deleted session " + id)) << t.screen();
    t.type("/switch " + id);
    ASSERT_TRUE(t.expect("no session " + id)) << t.screen();
    t.type("/exit");
    for (int i = 0; i < 100 && !t.dead(); ++i) std::this_thread::sleep_for(100ms);
    EXPECT_TRUE(t.dead());
}

TEST_F(AgentTmux, OneShotNonInteractiveWithTrace) {
    const std::string trace = (scratch_.path() / "trace.txt").string();
    const std::string cmd = agent({call("write", {{"path", "made.txt"}, {"content", "made\n"}}), "Made it."},
                                  "-p 'make a file' --non-interactive --yes --trace " + quote(trace));
    const test::RunResult r = test::run_command({"/bin/sh", "-c", cmd + " </dev/null"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("Made it."), std::string::npos) << r.output;
    std::ifstream in(work_ / "made.txt");
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "made\n");
    std::ifstream tr(trace);
    const std::string text(std::istreambuf_iterator<char>(tr), {});
    EXPECT_NE(text.find("=== prompt ==="), std::string::npos);
    EXPECT_NE(text.find("make a file"), std::string::npos);
    EXPECT_NE(text.find("<tool_result>wrote made.txt (5 bytes, 1 lines)</tool_result>"), std::string::npos) << text;
    EXPECT_NE(text.find("Made it."), std::string::npos);
    // --prefix-file: the model sees the seeded turns before the first message.
    const std::string prefix = (scratch_.path() / "prefix.txt").string();
    std::ofstream(prefix) << "USER: What is the capital of Italy?\nASSISTANT: Rome.\n";
    const std::string trace2 = (scratch_.path() / "trace2.txt").string();
    const test::RunResult seeded = test::run_command(
        {"/bin/sh", "-c", agent({"Fine."}, "-p 'and France?' --non-interactive --prefix-file " + quote(prefix) +
                                               " --trace " + quote(trace2)) + " </dev/null"});
    ASSERT_EQ(seeded.exit_code, 0) << seeded.output;
    std::ifstream tr2(trace2);
    const std::string text2(std::istreambuf_iterator<char>(tr2), {});
    const size_t q = text2.find("What is the capital of Italy?"), a = text2.find("Rome."), n = text2.find("and France?");
    ASSERT_NE(q, std::string::npos) << text2;
    ASSERT_NE(n, std::string::npos) << text2;
    EXPECT_TRUE(q < a && a < n) << text2;
    std::ofstream(prefix) << "ASSISTANT: hello\n";
    const test::RunResult bad = test::run_command(
        {"/bin/sh", "-c", agent({"x"}, "-p 'x' --non-interactive --prefix-file " + quote(prefix)) + " </dev/null 2>&1"});
    EXPECT_EQ(bad.exit_code, 2) << bad.output;
    EXPECT_NE(bad.output.find("expected a USER turn"), std::string::npos) << bad.output;
    // Without --yes a one-shot run refuses writes and says how to allow them.
    const std::string cmd2 = agent({call("write", {{"path", "no.txt"}, {"content", "x"}}), "ok"},
                                   "-p 'again' --non-interactive");
    const test::RunResult r2 = test::run_command({"/bin/sh", "-c", cmd2 + " </dev/null"});
    EXPECT_EQ(r2.exit_code, 0) << r2.output;
    EXPECT_NE(r2.output.find("run with --yes"), std::string::npos) << r2.output;
    EXPECT_FALSE(fs::exists(work_ / "no.txt"));
}

// Compaction: a long first message fills the 4096-token context past 85%; the next turn first
// summarises it (the scripted summary) into the system prompt and goes on from there, with the
// context nearly empty again. Turns come from stdin lines (--non-interactive without -p).
TEST_F(AgentTmux, CompactionWhenTheContextFillsUp) {
    const std::string trace = (scratch_.path() / "trace.txt").string();
    const std::string input = (scratch_.path() / "input.txt").string();
    {
        std::ofstream in(input);
        for (int i = 0; i < 1200; ++i) in << "fact" << i % 10 << " ";
        in << "\nwhat next?\n";
    }
    const std::string cmd = agent({"Noted.", "SUMMARY: the user listed many facts.", "Next is nothing."},
                                  "--non-interactive --trace " + quote(trace));
    const test::RunResult r = test::run_command({"/bin/sh", "-c", cmd + " <" + quote(input)});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("compacting (the context is filling up): summarising 2 messages, keeping 0"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("Next is nothing."), std::string::npos) << r.output;
    const std::regex ctx(R"(\[context (\d+)/4096 tokens)");
    std::vector<long> used;
    for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), ctx); it != std::sregex_iterator(); ++it)
        used.push_back(std::stol((*it)[1]));
    ASSERT_EQ(used.size(), 2u) << r.output;
    EXPECT_GE(used[0] * 100, 4096 * 85) << "the first turn passed the soft trigger";
    EXPECT_LT(used[1], used[0] / 2) << "the second turn runs on the compacted conversation";
    std::ifstream tr(trace);
    const std::string text(std::istreambuf_iterator<char>(tr), {});
    EXPECT_NE(text.find("## Summary of the earlier conversation\n\nSUMMARY: the user listed many facts."),
              std::string::npos)
        << text.substr(text.size() > 3000 ? text.size() - 3000 : 0);
}

// GLM 5.2: the same agent over the other chat format (<tool_call> syntax, tool results after
// <|observation|>), one-shot with the tool call read back from the model's own syntax.
TEST_F(AgentTmux, GlmFormatToolCall) {
    const std::string glm = scratch_.path() / "glm.gguf";
    const auto g = test::run_command({test::binary("ds4-gguf-gen"), "-q", "--arch", "glm-dsa", "--seed", "3", "-o", glm});
    ASSERT_EQ(g.exit_code, 0) << g.output;
    const std::string trace = (scratch_.path() / "trace.txt").string();
    std::string cmd = agent({"Reading." + chat::glm::render_tool_calls({{"", "read", R"({"path":"notes.txt"})"}}),
                             "It holds two lines."},
                            "-p 'what is in notes.txt?' --non-interactive --trace " + quote(trace));
    cmd.replace(cmd.find(quote(model_)), quote(model_).size(), quote(glm));
    const test::RunResult r = test::run_command({"/bin/sh", "-c", cmd + " </dev/null"});
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("* read {\"path\": \"notes.txt\"}"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("It holds two lines."), std::string::npos) << r.output;
    std::ifstream tr(trace);
    const std::string text(std::istreambuf_iterator<char>(tr), {});
    EXPECT_NE(text.find("<|observation|><tool_response>notes.txt: lines 1-2 (end of file)\n1\talpha\n2\tbeta\n"
                        "</tool_response><|assistant|>"),
              std::string::npos)
        << text;
}

}  // namespace
}  // namespace ds4::agent
