// The command-line tools against careless or hostile input (issue 22): every case ends in a
// clear one-line error and a non-zero exit, quickly. Each command runs under timeout(1), so a
// hang fails its test (exit 124) instead of stalling the suite.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "common/thread_count.h"
#include "support/tool_run.h"

namespace ds4::cli {
namespace {

using test::binary;

struct ToolRun {
    int exit_code = -1;
    std::string output;  // stdout and stderr together
};

// Runs a built tool under `timeout 30`.
ToolRun tool(const std::string& name, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"timeout", "30", binary(name)};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = test::run_command(argv);
    return {r.exit_code, r.output};
}

void expect_error(const ToolRun& r, const std::vector<std::string>& fragments, int code = 1) {
    EXPECT_EQ(r.exit_code, code) << r.output;
    for (const auto& f : fragments)
        EXPECT_NE(r.output.find(f), std::string::npos) << "missing: " << f << "\nin: " << r.output;
}

class CliHardening : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("tiny.gguf");
        const auto r = test::run_command(
            {binary("ds4-gguf-gen"), "-q", "--preset", "tiny", "--seed", "5", "-o", model_});
        ASSERT_EQ(r.exit_code, 0) << r.output;
        ids_ = dir_->file("ids.txt");
        test::write_token_ids(ids_, {1, 2, 3});
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    static test::TempDir* dir_;
    static std::string model_, ids_;  // a tiny model (random vocabulary), three token ids
};
test::TempDir* CliHardening::dir_ = nullptr;
std::string CliHardening::model_, CliHardening::ids_;

// Item 2: a FIFO as the model is refused by its type; open() would wait for a writer forever.
TEST_F(CliHardening, FifoAsModelIsRefusedWithoutBlocking) {
    test::TempDir d;
    const std::string fifo = d.file("model.gguf");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    for (const auto& args : std::vector<std::vector<std::string>>{
             {"--inspect", fifo}, {"-m", fifo, "-p", "hi"}, {"-m", fifo, "--token-ids", ids_}}) {
        SCOPED_TRACE(args[1]);
        expect_error(tool("ds4", args), {"ds4: ", fifo, "is a FIFO", "not a regular file"});
    }
    expect_error(tool("ds4-server", {"-m", fifo, "--port", "0"}),
                 {"ds4-server: ", fifo, "is a FIFO"});
    expect_error(tool("ds4-bench", {"-m", fifo, "--token-ids", ids_}),
                 {"ds4-bench: ", fifo, "is a FIFO"});
}

// Item 4: --threads has a cap in every tool that takes it (-t 20000 started 20,000 threads).
TEST_F(CliHardening, TooManyThreadsIsAnError) {
    const std::string cap = "1 to " + std::to_string(max_threads());
    expect_error(tool("ds4", {"-m", model_, "-p", "hi", "-t", "100000"}),
                 {"--threads: must be 0", cap, "got 100000"}, 105);
    expect_error(tool("ds4-server", {"-m", model_, "--port", "0", "--threads", "100000"}),
                 {"--threads: must be 0", cap}, 105);
    expect_error(tool("ds4-bench", {"-m", model_, "--token-ids", ids_, "-t", "100000"}),
                 {"--threads: must be 0", cap}, 105);
    expect_error(tool("ds4-gguf-gen", {"-q", "-o", dir_->file("x.gguf"), "--threads", "100000"}),
                 {"--threads: must be 0", cap}, 105);
    expect_error(tool("ds4", {"-m", model_, "-p", "hi", "-t", "-1"}), {"--threads: must be 0"}, 105);
}

// Item 16: a range error names the flag and the range in plain numbers (it printed DBL_MAX).
TEST_F(CliHardening, RangeErrorsArePlainNumbers) {
    for (const auto& [tool_name, args, message] :
         std::vector<std::tuple<std::string, std::vector<std::string>, std::string>>{
             {"ds4", {"--ctx", "0"}, "--ctx: must be at least 1, got 0"},
             {"ds4", {"-n", "-2"}, "--tokens: must be at least 0, got -2"},
             {"ds4", {"--prefill-chunk", "0"}, "--prefill-chunk: must be at least 1, got 0"},
             {"ds4-bench", {"--token-ids", ids_, "--prefill-chunk", "0"},
              "--prefill-chunk: must be at least 1, got 0"},
             {"ds4-bench", {"--token-ids", ids_, "--warmup", "-1"}, "--warmup: must be at least 0, got -1"},
         }) {
        SCOPED_TRACE(message);
        const ToolRun r = tool(tool_name, args);
        expect_error(r, {message}, 105);
        EXPECT_EQ(r.output.find("179769"), std::string::npos) << r.output;
    }
}

// Item 17: the sampling flags follow the server's rules (sampling/sampler.h).
TEST_F(CliHardening, SamplingFlagsFollowTheServersRules) {
    for (const auto& [flag, value, message] : std::vector<std::tuple<std::string, std::string, std::string>>{
             {"--temp", "-1", "--temp: must be a finite number >= 0, got -1"},
             {"--temp", "nan", "--temp: must be a finite number >= 0, got nan"},
             {"--top-p", "2", "--top-p: must be in [0, 1], got 2"},
             {"--min-p", "-1", "--min-p: must be in [0, 1], got -1"},
             {"--top-k", "-5", "--top-k: must be >= 0, got -5"},
         }) {
        SCOPED_TRACE(flag + " " + value);
        expect_error(tool("ds4", {"-m", model_, "-p", "hi", flag, value}), {message}, 105);
    }
}

// Item 18: a directory as --prompt-file ran an empty prompt.
TEST_F(CliHardening, DirectoryAsPromptFileIsAnError) {
    const std::string d = dir_->path().string();
    expect_error(tool("ds4", {"-m", model_, "--prompt-file", d}),
                 {"ds4: --prompt-file " + d + ": is a directory"});
    expect_error(tool("ds4", {"-m", model_, "--dump-tokens", "--raw", "--prompt-file", d}),
                 {"ds4: --prompt-file " + d + ": is a directory"});
    expect_error(tool("ds4-bench", {"-m", model_, "--prompt-file", d}),
                 {"ds4-bench: --prompt-file " + d + ": is a directory"});
}

// Item 15: --dump-logits-f32 left a partial file on a full disk. Now the file is replaced
// whole or not at all, and the failure is reported. The "full disk" is a file size limit
// (ulimit -f, SIGXFSZ ignored so the write fails with EFBIG); 3 x 512 logits need 6 KiB.
TEST_F(CliHardening, LogitsDumpIsWholeOrAbsent) {
    test::TempDir d;
    const std::string out = d.file("logits.f32");
    std::ofstream(out) << "previous";
    const std::string cmd = "trap '' XFSZ; ulimit -f 2; exec timeout 30 '" + binary("ds4") + "' -m '" +
                            model_ + "' --token-ids '" + ids_ + "' --dump-logits-f32 '" + out + "'";
    const auto r = test::run_command({"/bin/sh", "-c", cmd});
    expect_error({r.exit_code, r.output}, {"ds4: --dump-logits-f32 " + out, "File too large"});
    std::ifstream in(out);
    std::stringstream kept;
    kept << in.rdbuf();
    EXPECT_EQ(kept.str(), "previous");
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(d.path())) n += e.is_regular_file();
    EXPECT_EQ(n, 1u) << "a temporary file was left behind";

    // A full device is reported, not ignored.
    expect_error(tool("ds4", {"-m", model_, "--token-ids", ids_, "--dump-logits-f32", "/dev/full"}),
                 {"ds4: --dump-logits-f32 /dev/full", "No space left on device"});
    // Without a limit the whole file is there.
    const ToolRun ok = tool("ds4", {"-m", model_, "--token-ids", ids_, "--dump-logits-f32", out});
    ASSERT_EQ(ok.exit_code, 0) << ok.output;
    EXPECT_EQ(std::filesystem::file_size(out), 3u * 512u * sizeof(float));
}

}  // namespace
}  // namespace ds4::cli
