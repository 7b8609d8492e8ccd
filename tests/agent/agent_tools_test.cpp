// The agent's tools (src/agent/tools.h) against hostile input: paths out of the root (.., an
// absolute path, links that point out), a 100 MB file, a command that never ends; and the
// rules a user relies on: permission asked before a write, an edit, a command; edit refusing
// lines never read or changed since; caps that are stated.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "agent/root.h"
#include "agent/tools.h"
#include "common/error.h"
#include "support/tool_run.h"

namespace ds4::agent {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

void put(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
}

std::string get(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string numbered(int n) {
    std::string s;
    for (int i = 1; i <= n; ++i) s += "line " + std::to_string(i) + "\n";
    return s;
}

class AgentTools : public ::testing::Test {
protected:
    void SetUp() override {
        root_ = dir_.path() / "root";
        outside_ = dir_.path() / "outside";
        fs::create_directories(root_);
        put(outside_ / "secret.txt", "TOPSECRET\n");
        tools_ = std::make_unique<Tools>(Root(root_.string()), [this](const std::string& t, const std::string& w) {
            asked_.push_back(t + ": " + w);
            return allow_;
        });
    }
    ToolResult call(const std::string& name, const std::string& args) { return tools_->call(name, args); }

    test::TempDir dir_;
    fs::path root_, outside_;
    std::unique_ptr<Tools> tools_;
    std::vector<std::string> asked_;
    bool allow_ = true;
};

TEST_F(AgentTools, RootRefusesEveryWayOut) {
    const Root r(root_.string());
    EXPECT_EQ(r.resolve("a/b.txt"), fs::canonical(root_).string() + "/a/b.txt");
    EXPECT_EQ(r.resolve("."), fs::canonical(root_).string());
    EXPECT_THROW(r.resolve("../outside/secret.txt"), Error);
    EXPECT_THROW(r.resolve("a/../../outside/secret.txt"), Error);
    EXPECT_THROW(r.resolve((outside_ / "secret.txt").string()), Error);
    EXPECT_THROW(r.resolve("/etc/passwd"), Error);
    fs::create_directory_symlink(outside_, root_ / "link");
    EXPECT_THROW(r.resolve("link/secret.txt"), Error);
    EXPECT_THROW(r.resolve("link/new/file.txt"), Error);  // not there yet, still out
    fs::create_symlink(outside_ / "secret.txt", root_ / "file_link");
    EXPECT_THROW(r.resolve("file_link"), Error);
    fs::create_symlink(root_ / "nowhere", root_ / "dangling");
    EXPECT_THROW(r.resolve("dangling"), Error);
    EXPECT_THROW(r.resolve(""), Error);
    // A link that stays inside is fine.
    put(root_ / "real.txt", "x\n");
    fs::create_symlink(root_ / "real.txt", root_ / "inner_link");
    EXPECT_EQ(r.resolve("inner_link"), fs::canonical(root_ / "real.txt").string());
    // --allow-outside resolves without refusing.
    EXPECT_EQ(Root(root_.string(), true).resolve("../outside/secret.txt"),
              fs::canonical(outside_ / "secret.txt").string());
}

TEST_F(AgentTools, FileToolsCannotReachOutside) {
    fs::create_directory_symlink(outside_, root_ / "link");
    for (const auto& [tool, args] : std::vector<std::pair<std::string, std::string>>{
             {"read", R"({"path":"../outside/secret.txt"})"},
             {"read", R"({"path":"link/secret.txt"})"},
             {"write", R"({"path":"link/planted.txt","content":"x"})"},
             {"write", R"({"path":"/tmp/ds4_agent_escape.txt","content":"x"})"},
             {"list", R"({"path":".."})"},
             {"search", R"({"pattern":"TOPSECRET","path":"link"})"},
         }) {
        const ToolResult r = call(tool, args);
        EXPECT_TRUE(r.error) << tool << " " << args << ": " << r.text;
        EXPECT_NE(r.text.find("outside the working directory"), std::string::npos) << r.text;
        EXPECT_EQ(r.text.find("TOPSECRET"), std::string::npos);
    }
    EXPECT_TRUE(asked_.empty()) << "a refused path must not even be asked about";
    EXPECT_FALSE(fs::exists(outside_ / "planted.txt"));
    EXPECT_FALSE(fs::exists("/tmp/ds4_agent_escape.txt"));
    // search over the whole root does not follow the link out.
    const ToolResult s = call("search", R"({"pattern":"TOPSECRET"})");
    EXPECT_FALSE(s.error) << s.text;
    EXPECT_EQ(s.text.find("TOPSECRET"), std::string::npos) << s.text;
}

TEST_F(AgentTools, ReadPagesAndSaysWhereToContinue) {
    put(root_ / "f.txt", numbered(1200));
    ToolResult r = call("read", R"({"path":"f.txt"})");
    ASSERT_FALSE(r.error) << r.text;
    EXPECT_NE(r.text.find("lines 1-500"), std::string::npos) << r.text.substr(0, 200);
    EXPECT_NE(r.text.find("500\tline 500\n"), std::string::npos);
    EXPECT_EQ(r.text.find("line 501\n"), std::string::npos);
    EXPECT_NE(r.text.find("more from line 501"), std::string::npos);
    r = call("more", "{}");
    EXPECT_NE(r.text.find("lines 501-1000"), std::string::npos) << r.text.substr(0, 200);
    r = call("more", R"({"count": 1000})");
    EXPECT_NE(r.text.find("lines 1001-1200 (end of file)"), std::string::npos) << r.text.substr(0, 200);
    EXPECT_TRUE(call("more", "{}").error);
    r = call("read", R"({"path":"f.txt","start_line":10,"max_lines":2})");
    EXPECT_NE(r.text.find("10\tline 10\n11\tline 11\n"), std::string::npos) << r.text;
    EXPECT_EQ(r.text.find("line 12\n"), std::string::npos);
    r = call("read", R"({"path":"f.txt","whole":true})");
    EXPECT_NE(r.text.find("lines 1-1200 (end of file)"), std::string::npos);
    r = call("read", R"({"path":"f.txt","start_line":5000})");
    EXPECT_NE(r.text.find("the file has 1200"), std::string::npos) << r.text;
    EXPECT_TRUE(call("read", R"({"path":"missing.txt"})").error);
    EXPECT_TRUE(call("read", R"({"path":"."})").error);
    EXPECT_TRUE(call("read", R"({})").error);
    EXPECT_TRUE(call("read", "not json").error);
    EXPECT_TRUE(call("nosuchtool", "{}").error);
}

TEST_F(AgentTools, HundredMegabyteFilesAreCappedNotSwallowed) {
    {
        // 100 MB of 100-byte lines, and 100 MB on one line.
        std::ofstream lines(root_ / "big.log", std::ios::binary), one(root_ / "oneline.txt", std::ios::binary);
        const std::string l(99, 'x');
        std::string block;
        for (int i = 0; i < 10000; ++i) block += l + "\n";
        const std::string row(1 << 20, 'y');
        for (int i = 0; i < 100; ++i) {
            lines << block;
            one << row;
        }
    }
    const auto t0 = std::chrono::steady_clock::now();
    ToolResult r = call("read", R"({"path":"big.log","whole":true})");
    ASSERT_FALSE(r.error);
    EXPECT_LE(r.text.size(), 256u * 1024 + 1024);
    EXPECT_NE(r.text.find("[output capped at 262144 bytes]"), std::string::npos);
    EXPECT_NE(r.text.find("more from line"), std::string::npos);
    r = call("read", R"({"path":"oneline.txt"})");
    ASSERT_FALSE(r.error);
    EXPECT_LE(r.text.size(), 8192u) << "the one 100 MB line is cut";
    EXPECT_NE(r.text.find("[line cut: 104857600 bytes]"), std::string::npos) << r.text.substr(0, 100);
    r = call("search", R"({"pattern":"x+"})");
    EXPECT_NE(r.text.find("2 files over"), std::string::npos) << r.text.substr(0, 300);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 10s);
}

TEST_F(AgentTools, WritesAskFirst) {
    allow_ = false;
    ToolResult r = call("write", R"({"path":"new/a.txt","content":"hello\n"})");
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.text.find("did not allow"), std::string::npos);
    EXPECT_FALSE(fs::exists(root_ / "new/a.txt"));
    ASSERT_EQ(asked_.size(), 1u);
    EXPECT_EQ(asked_[0], "write: write new/a.txt (6 bytes, new file)");
    allow_ = true;
    r = call("write", R"({"path":"new/a.txt","content":"hello\n"})");
    EXPECT_FALSE(r.error) << r.text;
    EXPECT_EQ(get(root_ / "new/a.txt"), "hello\n");
}

TEST_F(AgentTools, EditOnlyChangesWhatWasSeen) {
    put(root_ / "e.txt", numbered(20));
    ToolResult r = call("edit", R"({"path":"e.txt","old":"line 3\n","new":"LINE THREE\n"})");
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.text.find("never read"), std::string::npos) << r.text;
    call("read", R"({"path":"e.txt","max_lines":5})");
    r = call("edit", R"({"path":"e.txt","old":"line 12\n","new":"x\n"})");
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.text.find("line 12 of e.txt was never shown"), std::string::npos) << r.text;
    r = call("edit", R"({"path":"e.txt","old":"line 1","new":"x"})");  // line 1, 10..19
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.text.find("occurs 11 times"), std::string::npos) << r.text;
    allow_ = false;
    r = call("edit", R"({"path":"e.txt","old":"line 3\n","new":"LINE THREE\n"})");
    EXPECT_TRUE(r.error);
    EXPECT_EQ(get(root_ / "e.txt"), numbered(20));
    allow_ = true;
    r = call("edit", R"({"path":"e.txt","old":"line 3\n","new":"LINE THREE\nline 3b\n"})");
    EXPECT_FALSE(r.error) << r.text;
    EXPECT_NE(get(root_ / "e.txt").find("line 2\nLINE THREE\nline 3b\nline 4\n"), std::string::npos);
    // Shown lines moved with the edit: old line 5 is line 6 now and can be edited.
    r = call("edit", R"({"path":"e.txt","old":"line 5\n","new":"five\n"})");
    EXPECT_FALSE(r.error) << r.text;
    // Changed behind the agent's back: read again first.
    call("read", R"({"path":"e.txt","whole":true})");
    std::this_thread::sleep_for(10ms);
    put(root_ / "e.txt", get(root_ / "e.txt") + "appended\n");
    r = call("edit", R"({"path":"e.txt","old":"line 4\n","new":"four\n"})");
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.text.find("changed since it was read"), std::string::npos) << r.text;
    // Reading it again counts only what this read shows: lines seen of the old version do not.
    call("read", R"({"path":"e.txt","max_lines":2})");
    r = call("edit", R"({"path":"e.txt","old":"line 10\n","new":"ten\n"})");
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.text.find("was never shown"), std::string::npos) << r.text;
    r = call("edit", R"({"path":"e.txt","old":"line 2\n","new":"two\n"})");
    EXPECT_FALSE(r.error) << r.text;
}

TEST_F(AgentTools, SearchAndList) {
    put(root_ / "src/a.cpp", "int main() {}\n// TODO: fix\n");
    put(root_ / "src/b.h", "// TODO later\n");
    put(root_ / ".git/config", "TODO in git\n");
    ToolResult r = call("search", R"({"pattern":"TODO"})");
    ASSERT_FALSE(r.error) << r.text;
    EXPECT_NE(r.text.find("2 matching lines"), std::string::npos) << r.text;
    EXPECT_NE(r.text.find("src/a.cpp:2: // TODO: fix"), std::string::npos) << r.text;
    EXPECT_NE(r.text.find("src/b.h:1:"), std::string::npos);
    EXPECT_EQ(r.text.find(".git"), std::string::npos);
    r = call("search", R"({"pattern":"TODO","max_results":1})");
    EXPECT_NE(r.text.find("1 matching lines (stopped at 1 lines"), std::string::npos) << r.text;
    r = call("search", R"({"pattern":"(unclosed"})");
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.text.find("bad pattern"), std::string::npos);
    r = call("list", R"({"depth":2})");
    ASSERT_FALSE(r.error) << r.text;
    EXPECT_NE(r.text.find("src/\n"), std::string::npos) << r.text;
    EXPECT_NE(r.text.find("  a.cpp  (27 bytes)"), std::string::npos) << r.text;
}

TEST_F(AgentTools, BashAsksRunsAndNeverHangs) {
    allow_ = false;
    ToolResult r = call("bash", R"({"command":"touch made"})");
    EXPECT_TRUE(r.error);
    EXPECT_FALSE(fs::exists(root_ / "made"));
    ASSERT_EQ(asked_.size(), 1u);
    EXPECT_EQ(asked_[0], "bash: run: touch made");
    allow_ = true;
    r = call("bash", R"({"command":"echo hi; pwd; exit 3"})");
    EXPECT_TRUE(r.error);
    EXPECT_NE(r.text.find("exit code 3"), std::string::npos) << r.text;
    EXPECT_NE(r.text.find("hi\n" + fs::canonical(root_).string()), std::string::npos) << r.text;

    // A command that never ends and floods: back after its timeout, output capped, still
    // running as a job until stopped.
    const auto t0 = std::chrono::steady_clock::now();
    r = call("bash", R"({"command":"yes flood","timeout_sec":1})");
    EXPECT_LT(std::chrono::steady_clock::now() - t0, 5s);
    EXPECT_NE(r.text.find("still running after"), std::string::npos) << r.text.substr(0, 300);
    EXPECT_NE(r.text.find("as background job 2"), std::string::npos) << r.text.substr(0, 300);
    EXPECT_NE(r.text.find("bytes of output dropped: only the last 32768 are kept"), std::string::npos);
    EXPECT_LE(r.text.size(), 32u * 1024 + 512);
    r = call("bash_status", R"({"id":2})");
    EXPECT_NE(r.text.find("still running"), std::string::npos) << r.text.substr(0, 300);
    r = call("bash_stop", R"({"id":2})");
    EXPECT_NE(r.text.find("stopped job 2: exit code"), std::string::npos) << r.text.substr(0, 300);
    EXPECT_TRUE(call("bash_status", R"({"id":2})").error);

    // Ctrl+C while waiting: back at once, the command goes on as a job.
    std::atomic<bool> cancel{false};
    std::thread t([&] {
        std::this_thread::sleep_for(300ms);
        cancel = true;
    });
    const auto t1 = std::chrono::steady_clock::now();
    r = tools_->call("bash", R"({"command":"sleep 100"})", &cancel);
    t.join();
    EXPECT_LT(std::chrono::steady_clock::now() - t1, 5s);
    EXPECT_NE(r.text.find("still running"), std::string::npos) << r.text;
    // The destructor kills what is left; a finished command with a leftover background child
    // does not hold the tool either.
    const auto t2 = std::chrono::steady_clock::now();
    r = call("bash", R"({"command":"(sleep 100 &) ; echo started"})");
    EXPECT_LT(std::chrono::steady_clock::now() - t2, 5s);
    EXPECT_NE(r.text.find("exit code 0"), std::string::npos) << r.text;
    tools_.reset();
}

TEST_F(AgentTools, SpecsNameEveryTool) {
    const std::string s = Tools::specs_json();
    for (const char* n : {"read", "more", "write", "edit", "search", "list", "bash", "bash_status", "bash_stop"})
        EXPECT_NE(s.find("\"name\":\"" + std::string(n) + "\""), std::string::npos) << n;
}

}  // namespace
}  // namespace ds4::agent
