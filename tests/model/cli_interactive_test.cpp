// ds4 end to end through a pseudo-terminal (forkpty): one-shot output on a terminal, and the
// interactive chat: turns, commands,
// suffix-only prefill, the prefill progress line, Ctrl+C during a reply and at the prompt,
// the history file; and the same chat scripted through a pipe.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::cli {
namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// A child process on the slave side of a pseudo-terminal.
class Pty {
public:
    // fsize_limit > 0: the child may write files up to that many bytes (RLIMIT_FSIZE, with
    // SIGXFSZ ignored so write() fails with EFBIG), a full disk in miniature.
    Pty(const std::vector<std::string>& argv, const std::string& home, rlim_t fsize_limit = 0) {
        struct winsize ws {};
        ws.ws_row = 40;
        ws.ws_col = 120;
        pid_ = forkpty(&fd_, nullptr, nullptr, &ws);
        if (pid_ == 0) {
            setenv("HOME", home.c_str(), 1);
            setenv("TERM", "xterm", 1);
            if (fsize_limit > 0) {
                signal(SIGXFSZ, SIG_IGN);
                const rlimit lim{fsize_limit, fsize_limit};
                setrlimit(RLIMIT_FSIZE, &lim);
            }
            std::vector<char*> args;
            for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
            args.push_back(nullptr);
            execv(args[0], args.data());
            _exit(127);
        }
    }
    ~Pty() {
        if (pid_ > 0 && !exited_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
        if (fd_ >= 0) close(fd_);
    }
    bool started() const { return pid_ > 0; }

    // Waits until `needle` appears in the output after the last expect() match.
    bool expect(const std::string& needle, std::chrono::milliseconds timeout = 60s) {
        const auto end = clock_type::now() + timeout;
        for (;;) {
            const size_t at = out_.find(needle, mark_);
            if (at != std::string::npos) {
                mark_ = at + needle.size();
                return true;
            }
            if (clock_type::now() >= end || !pump(end)) return false;
        }
    }
    // Output since the last match, without consuming it.
    std::string pending() const { return out_.substr(mark_); }
    const std::string& all() const { return out_; }
    void send(const std::string& s) { ASSERT_EQ(write(fd_, s.data(), s.size()), ssize_t(s.size())); }

    // Exit status (128 + signal when killed), or -1 on timeout.
    int wait_exit(std::chrono::milliseconds timeout = 30s) {
        const auto end = clock_type::now() + timeout;
        while (clock_type::now() < end) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                exited_ = true;
                return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
            }
            pump(clock_type::now() + 50ms);
        }
        return -1;
    }

private:
    // Reads what is available until `end`; false at EOF.
    bool pump(clock_type::time_point end) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(end - clock_type::now());
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, int(std::max<int64_t>(1, left.count()))) <= 0) return true;
        char buf[4096];
        const ssize_t n = read(fd_, buf, sizeof buf);
        if (n <= 0) return false;
        out_.append(buf, size_t(n));
        return true;
    }

    pid_t pid_ = -1;
    int fd_ = -1;
    bool exited_ = false;
    std::string out_;
    size_t mark_ = 0;
};

class CliInteractive : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("vocab-tiny.gguf");
        auto args = test::kTinyQ8Io;
        // Trained for 64k positions: the tests ask for contexts up to 32768.
        args.insert(args.end(), {"--seed", "3", "--ctx", "65536"});
        const auto r = test::write_tiny_model(model_, args);
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    static std::vector<std::string> ds4(std::vector<std::string> extra) {
        std::vector<std::string> a = {test::binary("ds4"), "-m", model_, "--threads", "2"};
        a.insert(a.end(), extra.begin(), extra.end());
        return a;
    }
    // The numbers of "this turn prefilled N, reused M" lines, in order.
    static std::vector<std::pair<long, long>> prefills(const std::string& out) {
        std::vector<std::pair<long, long>> v;
        const std::regex re("this turn prefilled ([0-9]+), reused ([0-9]+)");
        for (auto it = std::sregex_iterator(out.begin(), out.end(), re); it != std::sregex_iterator(); ++it)
            v.push_back({std::stol((*it)[1]), std::stol((*it)[2])});
        return v;
    }

    static test::TempDir* dir_;
    static std::string model_;
};
test::TempDir* CliInteractive::dir_ = nullptr;
std::string CliInteractive::model_;

TEST_F(CliInteractive, TurnsCommandsAndSuffixOnlyPrefill) {
    test::TempDir home;
    Pty p(ds4({"--ctx", "2048", "--nothink", "--temp", "0", "-n", "6"}), home.path().string());
    ASSERT_TRUE(p.started());
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("Hello there\r");
    ASSERT_TRUE(p.expect("generation:")) << p.all();
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("/help\r");
    ASSERT_TRUE(p.expect("/ctx N")) << p.all();
    ASSERT_TRUE(p.expect("ds4> "));
    p.send("/think\r");
    ASSERT_TRUE(p.expect("thinking: on")) << p.all();
    ASSERT_TRUE(p.expect("ds4> "));
    p.send("And again\r");
    ASSERT_TRUE(p.expect("generation:")) << p.all();
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("/bogus\r");
    ASSERT_TRUE(p.expect("unknown command /bogus")) << p.all();
    ASSERT_TRUE(p.expect("ds4> "));
    p.send("/quit\r");
    EXPECT_EQ(p.wait_exit(), 0) << p.all();

    // The second turn prefilled only the new suffix: the last reply's last token, EOS,
    // <｜User｜>, the text, <｜Assistant｜><think> — not the first turn again.
    const auto pf = prefills(p.all());
    ASSERT_EQ(pf.size(), 2u) << p.all();
    EXPECT_GT(pf[0].first, 8);
    EXPECT_EQ(pf[0].second, 0);
    EXPECT_GE(pf[1].second, pf[0].first);
    EXPECT_LE(pf[1].first, 10) << p.all();

    // Both lines went to the history file.
    std::ifstream h(home.file(".ds4_history"));
    std::stringstream ss;
    ss << h.rdbuf();
    EXPECT_NE(ss.str().find("Hello"), std::string::npos) << ss.str();
    EXPECT_NE(ss.str().find("And"), std::string::npos) << ss.str();
}

TEST_F(CliInteractive, CtrlCStopsAReplyAndReturnsToThePrompt) {
    test::TempDir home;
    // A random model rarely says EOS: without Ctrl+C this reply would run to the full context.
    Pty p(ds4({"--ctx", "32768", "--nothink", "--temp", "1", "--seed", "1"}), home.path().string());
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("Tell me a long story\r");
    // Wait for some reply text, then interrupt.
    const auto t0 = clock_type::now();
    while (p.pending().size() < 200 && clock_type::now() - t0 < 60s) p.expect("\x01", 100ms);
    ASSERT_GE(p.pending().size(), 200u) << p.all();
    p.send("\x03");
    ASSERT_TRUE(p.expect("[stopped]", 10s)) << p.all();
    ASSERT_TRUE(p.expect("ds4> ", 10s)) << p.all();
    // The conversation goes on after the interruption.
    p.send("/nothink\r");
    ASSERT_TRUE(p.expect("thinking: off")) << p.all();
    ASSERT_TRUE(p.expect("ds4> "));
    // Ctrl+C at the prompt leaves with 130.
    p.send("\x03");
    EXPECT_EQ(p.wait_exit(), 130) << p.all();
}

TEST_F(CliInteractive, ProgressDuringLongPrefillAndRollbackOnCtrlC) {
    test::TempDir home;
    std::string text;
    for (int i = 0; i < 1500; ++i) text += "word" + std::to_string(i) + " ";
    const std::string file = home.file("long.txt");
    std::ofstream(file) << text;
    Pty p(ds4({"--ctx", "8192", "--nothink", "--temp", "0", "-n", "4", "--prefill-chunk", "16"}),
          home.path().string());
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("/read " + file + "\r");
    ASSERT_TRUE(p.expect("prefill: 16/")) << p.all();
    ASSERT_TRUE(p.expect("prefill: 48/")) << p.all();  // it moves
    p.send("\x03");
    ASSERT_TRUE(p.expect("[interrupted: the message was not sent]", 20s)) << p.all();
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    // The rolled-back message is not in the conversation: the next turn starts from scratch.
    p.send("Short one\r");
    ASSERT_TRUE(p.expect("generation:", 120s)) << p.all();
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("/quit\r");
    EXPECT_EQ(p.wait_exit(), 0);
    const auto pf = prefills(p.all());
    ASSERT_EQ(pf.size(), 1u) << p.all();
    EXPECT_LT(pf[0].first + pf[0].second, 100) << "the interrupted message stayed in the transcript";
}

TEST_F(CliInteractive, OneShotOnATerminal) {
    test::TempDir home;
    // Thinking on: the whole reply is reasoning (the random model never closes </think>), which
    // a terminal shows dimmed (SGR 2) and resets at the end.
    Pty p(ds4({"-p", "Hi", "--think", "--temp", "0", "-n", "8"}), home.path().string());
    ASSERT_TRUE(p.expect("\x1b[2m")) << p.all();
    ASSERT_TRUE(p.expect("\x1b[0m")) << p.all();
    ASSERT_TRUE(p.expect("prefill: ")) << p.all();
    ASSERT_TRUE(p.expect("generation: ")) << p.all();
    EXPECT_EQ(p.wait_exit(), 0) << p.all();
    EXPECT_EQ(p.all().find("ds4> "), std::string::npos);
}

TEST_F(CliInteractive, ScriptedThroughAPipe) {
    const std::string in = dir_->file("script.txt");
    std::ofstream(in) << "Hi\n/nothink\n\nSecond message\n/ctx 512\nThird\n";
    std::string cmd = "exec";
    for (const auto& a : ds4({"--ctx", "1024", "--temp", "0", "-n", "3"})) cmd += " '" + a + "'";
    cmd += " <'" + in + "' 2>'" + dir_->file("err.txt") + "'";
    const auto r = test::run_command({"/bin/sh", "-c", cmd});
    std::ifstream e(dir_->file("err.txt"));
    std::stringstream err;
    err << e.rdbuf();
    EXPECT_EQ(r.exit_code, 0) << r.output << err.str();
    EXPECT_EQ(r.output.find("ds4> "), std::string::npos) << "prompt printed to a pipe";
    const auto pf = prefills(err.str());
    ASSERT_EQ(pf.size(), 3u) << err.str();
    EXPECT_GT(pf[1].second, 0) << "second turn did not reuse the first";
    EXPECT_EQ(pf[2].second, 0) << "/ctx did not start a new conversation";
    EXPECT_NE(err.str().find("thinking: off"), std::string::npos);
    EXPECT_NE(err.str().find("new conversation, context 512"), std::string::npos);
}

// Issue 22 item 15: the history file was rewritten in place after every line, and a full disk
// cut it mid-entry without a word. It is now replaced whole or not at all, and a failed save
// is reported. The disk is "full" past 2 KiB here; the old history is ~4 KiB.
TEST_F(CliInteractive, HistoryIsKeptWholeWhenTheDiskIsFull) {
    test::TempDir home;
    const std::string path = home.file(".ds4_history");
    std::string old = "_HiStOrY_V2_\n";
    for (int i = 0; i < 300; ++i) old += "oldentry" + std::to_string(1000 + i) + "\n";
    std::ofstream(path, std::ios::binary) << old;
    Pty p(ds4({"--ctx", "512"}), home.path().string(), 2048);
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("/help\r");
    ASSERT_TRUE(p.expect("cannot save the history")) << p.all();
    EXPECT_NE(p.all().find(path), std::string::npos) << p.all();
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("/nothink\r");  // reported once, not after every line
    ASSERT_TRUE(p.expect("ds4> ")) << p.all();
    p.send("/quit\r");
    EXPECT_EQ(p.wait_exit(), 0) << p.all();
    size_t reports = 0;
    for (size_t at = 0; (at = p.all().find("cannot save the history", at)) != std::string::npos; ++at) ++reports;
    EXPECT_EQ(reports, 1u) << p.all();

    std::ifstream h(path, std::ios::binary);
    std::stringstream now;
    now << h.rdbuf();
    EXPECT_EQ(now.str(), old) << "the history file changed";
    std::vector<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator(home.path())) names.push_back(e.path().filename().string());
    EXPECT_EQ(names, std::vector<std::string>{".ds4_history"}) << "a temporary file was left behind";
}

// Issue 22 item 18: /read of a directory sent an empty message.
TEST_F(CliInteractive, ReadOfADirectoryIsAnError) {
    const std::string in = dir_->file("read-dir.txt"), err_file = dir_->file("read-dir-err.txt");
    std::ofstream(in) << "/read " << dir_->path().string() << "\n/quit\n";
    std::string cmd = "exec";
    for (const auto& a : ds4({"--ctx", "512", "-n", "2"})) cmd += " '" + a + "'";
    cmd += " <'" + in + "' 2>'" + err_file + "'";
    const auto r = test::run_command({"/bin/sh", "-c", cmd});
    std::ifstream e(err_file);
    std::stringstream err;
    err << e.rdbuf();
    EXPECT_EQ(r.exit_code, 0) << err.str();
    EXPECT_NE(err.str().find("ds4: /read " + dir_->path().string() + ": is a directory"), std::string::npos)
        << err.str();
    EXPECT_TRUE(prefills(err.str()).empty()) << "a turn ran: " << err.str();
}

// /save writes the conversation in the disk KV cache format; /load in a new process continues
// it: the next turn reuses the saved tokens instead of prefilling them again.
TEST_F(CliInteractive, SaveAndLoadContinueAConversation) {
    const std::string saved = dir_->file("conv.kv");
    auto run = [&](const std::string& script, const std::string& tag) {
        const std::string in = dir_->file(tag + ".txt"), err_file = dir_->file(tag + "-err.txt");
        std::ofstream(in) << script;
        std::string cmd = "exec";
        for (const auto& a : ds4({"--ctx", "1024", "--temp", "0", "-n", "3"})) cmd += " '" + a + "'";
        cmd += " <'" + in + "' 2>'" + err_file + "'";
        const auto r = test::run_command({"/bin/sh", "-c", cmd});
        std::ifstream e(err_file);
        std::stringstream err;
        err << e.rdbuf();
        EXPECT_EQ(r.exit_code, 0) << err.str();
        return err.str();
    };
    const std::string first = run("Hello there\n/save " + saved + "\n/quit\n", "save");
    ASSERT_NE(first.find("saved "), std::string::npos) << first;
    ASSERT_TRUE(std::filesystem::exists(saved));
    const std::string second = run("/load " + saved + "\nAnd then?\n/quit\n", "load");
    ASSERT_NE(second.find("loaded "), std::string::npos) << second;
    const auto pf = prefills(second);
    ASSERT_EQ(pf.size(), 1u) << second;
    EXPECT_GT(pf[0].second, 10) << "the loaded conversation was not reused: " << second;
    // Not a kv file: an error, the chat goes on.
    const std::string junk = dir_->file("junk.kv");
    std::ofstream(junk) << "not a cache file at all, but long enough to hold a header" << std::string(200, '.');
    const std::string third = run("/load " + junk + "\n/quit\n", "junk");
    EXPECT_NE(third.find("ds4: /load " + junk + ": not a ds4 kv cache file"), std::string::npos) << third;
}

}  // namespace
}  // namespace ds4::cli
