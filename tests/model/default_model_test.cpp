// The embedded default model (scripts/run-default.sh) serves coding agents: it declares a
// 65536-token context, so a 12k-token prompt is not refused, and the test fixture writes the
// same file the script does.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4 {
namespace {

TEST(DefaultModel, TheScriptAndTheFixtureDeclareTheSameContext) {
    std::ifstream in(std::string(DS4_SOURCE_DIR) + "/scripts/run-default.sh");
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string script = ss.str();
    EXPECT_NE(script.find(std::string("--ctx ") + test::kDefaultModelCtx + " --seed 1 -o models/default.gguf"),
              std::string::npos)
        << "scripts/run-default.sh no longer writes the default model with --ctx " << test::kDefaultModelCtx;
    EXPECT_GE(std::stoll(test::kDefaultModelCtx), 65536);
}

TEST(DefaultModel, ContextsThatCodingAgentsNeedAreAccepted) {
    test::TempDir dir;
    const std::string model = dir.file("default.gguf");
    const auto w = test::write_tiny_model(model, test::kTinyQ8Io);
    ASSERT_EQ(w.exit_code, 0) << w.output;
    const auto inspect = test::run_command({test::binary("ds4"), "--inspect", model});
    const size_t key = inspect.output.find("deepseek4.context_length ");
    ASSERT_NE(key, std::string::npos) << inspect.output.substr(0, 2000);
    const std::string line = inspect.output.substr(key, inspect.output.find('\n', key) - key);
    EXPECT_EQ(line.substr(line.find_last_of(' ') + 1), test::kDefaultModelCtx) << line;
    // 16k: refused as "above the model's trained context of 4096" before.
    const auto r = test::run_command(
        {test::binary("ds4"), "-m", model, "--ctx", "16384", "-p", "hi", "--nothink", "-n", "1", "--threads", "2"});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(r.output.find("trained context"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ds4
