// The command-line tools against careless or hostile input (issue 22): every case ends in a
// clear one-line error and a non-zero exit, quickly. Each command runs under timeout(1), so a
// hang fails its test (exit 124) instead of stalling the suite.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <string>
#include <vector>

#include "tool_run.h"

namespace ds4::cli {
namespace {

using oracle::binary;

struct Run {
    int exit_code = -1;
    std::string output;  // stdout and stderr together
};

// Runs a built tool under `timeout 30`.
Run tool(const std::string& name, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"timeout", "30", binary(name)};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = oracle::run_command(argv);
    return {r.exit_code, r.output};
}

void expect_error(const Run& r, const std::vector<std::string>& fragments, int code = 1) {
    EXPECT_EQ(r.exit_code, code) << r.output;
    for (const auto& f : fragments)
        EXPECT_NE(r.output.find(f), std::string::npos) << "missing: " << f << "\nin: " << r.output;
}

class CliHardening : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new oracle::TempDir;
        model_ = dir_->file("tiny.gguf");
        const auto r = oracle::run_command(
            {binary("ds4-gguf-gen"), "-q", "--preset", "tiny", "--seed", "5", "-o", model_});
        ASSERT_EQ(r.exit_code, 0) << r.output;
        ids_ = dir_->file("ids.txt");
        oracle::write_token_ids(ids_, {1, 2, 3});
    }
    static void TearDownTestSuite() {
        delete dir_;
        dir_ = nullptr;
    }
    static oracle::TempDir* dir_;
    static std::string model_, ids_;  // a tiny model (random vocabulary), three token ids
};
oracle::TempDir* CliHardening::dir_ = nullptr;
std::string CliHardening::model_, CliHardening::ids_;

// Item 2: a FIFO as the model is refused by its type; open() would wait for a writer forever.
TEST_F(CliHardening, FifoAsModelIsRefusedWithoutBlocking) {
    oracle::TempDir d;
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

}  // namespace
}  // namespace ds4::cli
