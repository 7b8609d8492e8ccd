// ds4-server with the official npm clients (openai, @anthropic-ai/sdk): the scenario scripts
// in js/ make their requests in the order of the scripted outputs (js/forced.json, or the
// arrays below) and assert what the SDKs parse.
// Skipped when node or the clients (scripts/setup.sh -> .cache/clients) are missing.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "server_process.h"
#include "support/tool_run.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;

json forced_outputs() {
    std::ifstream in(std::string(DS4_SOURCE_DIR) + "/tests/server/js/forced.json");
    std::stringstream ss;
    ss << in.rdbuf();
    return json::parse(ss.str());
}

// Runs js/SCRIPT (with `args` after the URL and clients dir) against a server started with
// `server_args` and the scripted outputs `forced`; returns the script's output after checking
// that every scenario passed.
std::string run_node(const std::string& script, const std::vector<std::string>& args, const json& forced,
                     const std::vector<std::string>& server_args = {}) {
    ServerProcess s(server_args, forced);
    std::vector<std::string> argv = {"node", std::string(DS4_SOURCE_DIR) + "/tests/server/js/" + script, s.url(),
                                     clients_dir()};
    argv.insert(argv.end(), args.begin(), args.end());
    const auto r = test::run_command(argv);
    EXPECT_EQ(r.exit_code, 0) << r.output << "\nserver log:\n" << s.log();
    EXPECT_NE(r.output.find("scenarios passed"), std::string::npos) << r.output;
    return r.output;
}

#define SKIP_WITHOUT_CLIENTS()                                   \
    do {                                                         \
        std::string why;                                         \
        if (!node_clients_available(why)) GTEST_SKIP() << why;   \
    } while (0)

TEST(ServerClients, OpenAiSdk) {
    SKIP_WITHOUT_CLIENTS();
    run_node("openai_client.cjs", {}, forced_outputs());
}
TEST(ServerClients, AnthropicSdk) {
    SKIP_WITHOUT_CLIENTS();
    run_node("anthropic_client.cjs", {}, forced_outputs());
}

// --- Exact tool replay (docs/SERVER.md) -------------------------------------------------------

const std::string kDsml = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";
// What the model "samples" for the call: unlike the canonical rendering it has " 3 " for 3,
// the city without its string="true" attribute, and days before city.
const std::string kSampledCall = "Need the weather.</think>\n\n<" + kDsml + "tool_calls>\n<" + kDsml +
                                 "invoke name=\"get_weather\">\n<" + kDsml +
                                 "parameter name=\"days\" string=\"false\"> 3 </" + kDsml + "parameter>\n<" + kDsml +
                                 "parameter name=\"city\">Paris</" + kDsml + "parameter>\n</" + kDsml +
                                 "invoke>\n</" + kDsml + "tool_calls>";

struct Reuse {
    int cached = -1;  // prompt tokens the second request reused
    int turn1 = -1;   // the first request's prompt + completion tokens
};

// js/tool_replay.cjs API: a streamed tool call sent back with its result by the SDK.
Reuse replay_round_trip(const std::string& api, const std::vector<std::string>& server_args) {
    const std::string out =
        run_node("tool_replay.cjs", {api}, json::array({kSampledCall, "Short.</think>Sunny."}), server_args);
    std::smatch m;
    Reuse r;
    if (std::regex_search(out, m, std::regex("replay " + api + " cached=([0-9]+) turn1=([0-9]+)")))
        r = {std::stoi(m[1]), std::stoi(m[2])};
    else
        ADD_FAILURE() << "no replay line: " << out;
    return r;
}

// The live session holds the first turn's prompt and its sampled tokens (the last one maybe
// not evaluated); with exact replay the second prompt starts with all of them. Rendered
// canonically the block differs at " 3 ", so the same flow reuses clearly less: the
// assertion would catch a client-side shape the replay does not recognise.
void expect_exact_replay(const std::string& api) {
    SKIP_WITHOUT_CLIENTS();
    const Reuse exact = replay_round_trip(api, {});
    EXPECT_GE(exact.cached, exact.turn1 - 1) << api;
    EXPECT_LE(exact.cached, exact.turn1) << api;
    const Reuse canonical = replay_round_trip(api, {"--disable-exact-dsml-tool-replay"});
    EXPECT_EQ(canonical.turn1, exact.turn1) << api;
    EXPECT_LT(canonical.cached, canonical.turn1 - 5) << api;
}

TEST(ServerClients, ChatStreamedToolCallIsReplayedExactly) { expect_exact_replay("chat"); }
TEST(ServerClients, ResponsesStreamedFunctionCallIsReplayedExactly) { expect_exact_replay("responses"); }
TEST(ServerClients, AnthropicStreamedToolUseIsReplayedExactly) { expect_exact_replay("anthropic"); }

// --- Forced tool choice (docs/SERVER.md "Tool choice") --------------------------------------

// The scripted outputs are what the model writes after the forced opening (the prompt already
// ends with "</think>\n\n<tool_calls>\n" and, for a named tool, its invoke line).
const std::string kTimeTail = "<" + kDsml + "parameter name=\"zone\" string=\"true\">UTC</" + kDsml +
                              "parameter>\n</" + kDsml + "invoke>\n</" + kDsml + "tool_calls>";
const std::string kWeatherCall = "<" + kDsml + "invoke name=\"get_weather\">\n<" + kDsml +
                                 "parameter name=\"city\" string=\"true\">Paris</" + kDsml + "parameter>\n</" +
                                 kDsml + "invoke>\n</" + kDsml + "tool_calls>";

TEST(ServerClients, OpenAiSdkForcedToolChoice) {
    SKIP_WITHOUT_CLIENTS();
    // chat named, chat named streamed, chat required streamed, Responses named, Responses required.
    run_node("forced_choice.cjs", {"openai"}, json::array({kTimeTail, kTimeTail, kWeatherCall, kTimeTail, kWeatherCall}));
}

TEST(ServerClients, AnthropicSdkForcedToolChoice) {
    SKIP_WITHOUT_CLIENTS();
    // {type: tool}, {type: tool} streamed, {type: any} streamed.
    run_node("forced_choice.cjs", {"anthropic"}, json::array({kTimeTail, kTimeTail, kWeatherCall}));
}

}  // namespace
}  // namespace ds4::servertest
