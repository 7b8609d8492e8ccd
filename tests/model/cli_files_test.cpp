// The second hardening round (issue 37 item 5) in the ds4 tool: /save never replaces a FIFO
// (or a device) with a regular file; /load, /read, --prompt-file and --ssd-streaming-preload
// never block on a FIFO; --ssd-streaming-preload never reads a device without bound. Every
// command runs under timeout(1), so a hang fails (exit 124) instead of stalling the suite.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::cli {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

class CliFiles : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("tiny.gguf");
        const auto r = test::write_tiny_model(model_, test::kTinyQ8Io);
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    // ds4 under timeout with `stdin_text` as its input; stdout and stderr together.
    static test::RunResult ds4(const std::vector<std::string>& args, const std::string& stdin_text = "") {
        const std::string in = dir_->file("stdin.txt");
        std::ofstream(in) << stdin_text;
        std::string cmd = "exec timeout 60 '" + test::binary("ds4") + "' -m '" + model_ + "' --threads 2";
        for (const auto& a : args) cmd += " '" + a + "'";
        cmd += " <'" + in + "' 2>&1";
        return test::run_command({"/bin/sh", "-c", cmd});
    }
    static std::string fifo(const std::string& name) {
        const std::string p = dir_->file(name);
        std::remove(p.c_str());
        EXPECT_EQ(mkfifo(p.c_str(), 0600), 0);
        return p;
    }
    static test::TempDir* dir_;
    static std::string model_;
};
test::TempDir* CliFiles::dir_ = nullptr;
std::string CliFiles::model_;

TEST_F(CliFiles, InteractiveCommandsNeverReplaceOrWaitOnAFifo) {
    const std::string f = fifo("state.kv");
    const auto r = ds4({"--ctx", "512", "-n", "2"}, "/save " + f + "\n/load " + f + "\n/read " + f + "\n/quit\n");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, "ds4: /save " + f + ": is a FIFO (named pipe), not a regular file")) << r.output;
    EXPECT_TRUE(contains(r.output, "ds4: /load " + f + ": is a FIFO (named pipe), not a regular file")) << r.output;
    EXPECT_TRUE(contains(r.output, "ds4: /read " + f + ": is a FIFO (named pipe) that nobody writes to")) << r.output;
    EXPECT_FALSE(contains(r.output, " tokens to " + f)) << r.output;  // "saved N tokens to F"
    struct stat st {};
    ASSERT_EQ(::lstat(f.c_str(), &st), 0);
    EXPECT_TRUE(S_ISFIFO(st.st_mode)) << "the FIFO was replaced";
}

TEST_F(CliFiles, APromptFileFifoWithoutAWriterIsAnError) {
    const std::string f = fifo("prompt.txt");
    const auto r = ds4({"--prompt-file", f, "-n", "1"});
    EXPECT_EQ(r.exit_code, 1) << r.output;
    EXPECT_TRUE(contains(r.output, f + ": is a FIFO (named pipe) that nobody writes to")) << r.output;
    // A pipe being written is a prompt, as before.
    const auto p = test::run_command({"/bin/bash", "-c",
                                      "exec timeout 60 '" + test::binary("ds4") + "' -m '" + model_ +
                                          "' --threads 2 -n 1 --prompt-file <(echo Hello) 2>&1"});
    EXPECT_EQ(p.exit_code, 0) << p.output;
}

TEST_F(CliFiles, PreloadProfilesAreBoundedRegularFiles) {
    const std::string f = fifo("profile.json");
    // (/dev/zero, read without bound before, is refused the same way: tests/unit/hardening_files_test.)
    for (const auto& [path, kind] : {std::pair{f, "is a FIFO (named pipe)"}}) {
        const auto r = ds4({"--ssd-streaming", "--ssd-streaming-cache-experts", "2", "--ssd-streaming-preload", path, "-p", "Hello", "-n", "1"});
        EXPECT_EQ(r.exit_code, 1) << r.output;
        EXPECT_TRUE(contains(r.output, "cannot read the expert profile " + path + ": " + kind)) << r.output;
    }
}

}  // namespace
}  // namespace ds4::cli
