// ds4-server with the official npm clients (openai, @anthropic-ai/sdk): the scenario scripts
// in js/ make their requests in the order of js/forced.json and assert what the SDKs parse.
// Skipped when node or the clients (scripts/setup.sh -> .cache/clients) are missing.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server_process.h"
#include "support/tool_run.h"

namespace ds4::servertest {
namespace {

nlohmann::json forced_outputs() {
    std::ifstream in(std::string(DS4_SOURCE_DIR) + "/tests/server/js/forced.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return nlohmann::json::parse(ss.str());
}

void run_script(const std::string& script) {
    std::string why;
    if (!node_clients_available(why)) GTEST_SKIP() << why;
    ServerProcess s({}, forced_outputs());
    const auto r = oracle::run_command(
        {"node", std::string(DS4_SOURCE_DIR) + "/tests/server/js/" + script, s.url(), clients_dir()});
    EXPECT_EQ(r.exit_code, 0) << r.output << "\nserver log:\n" << s.log();
    EXPECT_NE(r.output.find("scenarios passed"), std::string::npos) << r.output;
}

TEST(ServerClients, OpenAiSdk) { run_script("openai_client.cjs"); }
TEST(ServerClients, AnthropicSdk) { run_script("anthropic_client.cjs"); }

}  // namespace
}  // namespace ds4::servertest
