// Issue 36 item 5 against a real server (tiny model, scripted output): live continuations
// (a Responses function_call_output or an Anthropic tool_result sent without its history
// continues the live session that made the call), previous_response_id with its store, the
// 400s for ids the server does not hold, and DSML-aware sampling (a tool call's structure is
// sampled greedily at any temperature). docs/SERVER.md "Live continuations and
// previous_response_id", "DSML-aware sampling".
#include <gtest/gtest.h>

#include "server_process.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;

const std::string D = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";
// What the model "samples" (after the prompt's <think>): reasoning, then one canonical call.
const std::string kCall = "Need the weather.</think>\n\n<" + D + "tool_calls>\n<" + D +
                          "invoke name=\"get_weather\">\n<" + D + "parameter name=\"city\" string=\"true\">Paris</" +
                          D + "parameter>\n</" + D + "invoke>\n</" + D + "tool_calls>";
const json kSchema = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};

json responses_tools() { return json::array({{{"type", "function"}, {"name", "get_weather"}, {"parameters", kSchema}}}); }

json function_call_of(const json& response) {
    for (const auto& item : response["output"])
        if (item["type"] == "function_call") return item;
    return nullptr;
}

int cached_of(const json& r) { return r["usage"]["input_tokens_details"]["cached_tokens"].get<int>(); }
int turn_tokens(const json& r) { return r["usage"]["input_tokens"].get<int>() + r["usage"]["output_tokens"].get<int>(); }

void expect_openai_400(const HttpResult& r, const std::string& param, const std::string& contains) {
    EXPECT_EQ(r.status, 400) << r.body;
    const json j = json::parse(r.body, nullptr, false);
    ASSERT_TRUE(j.contains("error")) << r.body;
    EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r.body;
    EXPECT_EQ(j["error"]["param"], param) << r.body;
    EXPECT_NE(j["error"]["message"].get<std::string>().find(contains), std::string::npos) << r.body;
}

TEST(ServerLiveContinuation, ResponsesToolOutputAloneContinuesTheLiveSession) {
    ServerProcess s({}, json::array({kCall, "Fine.</think>Sunny.", "Fine.</think>Sunny."}));
    const std::string u = s.url() + "/v1/responses";
    auto r1 = post(u, {{"input", "weather in Paris?"}, {"tools", responses_tools()}});
    ASSERT_EQ(r1.status, 200) << r1.body;
    const json j1 = r1.json();
    const json call = function_call_of(j1);
    ASSERT_TRUE(call.is_object()) << j1;
    const std::string call_id = call["call_id"];

    // Only the tool's result: the server continues the reply that made the call.
    const json output = {{"type", "function_call_output"}, {"call_id", call_id}, {"output", "sunny"}};
    auto r2 = post(u, {{"input", json::array({output})}, {"tools", responses_tools()}});
    ASSERT_EQ(r2.status, 200) << r2.body;
    const json j2 = r2.json();
    EXPECT_EQ(j2["output"].back()["content"][0]["text"], "Sunny.") << j2;
    // The whole live session is reused: turn 1's prompt and every sampled token but the last
    // (never evaluated: generation stopped at the block's end).
    EXPECT_GE(cached_of(j2), turn_tokens(j1) - 1) << j2;

    // The same prompt as the full replay of that history (reasoning, call, result).
    const json replay = json::array({{{"role", "user"}, {"content", "weather in Paris?"}},
                                     {{"type", "reasoning"}, {"summary", {{{"type", "summary_text"},
                                                                           {"text", "Need the weather."}}}}},
                                     {{"type", "function_call"}, {"call_id", call_id}, {"name", "get_weather"},
                                      {"arguments", call["arguments"]}},
                                     output});
    auto r3 = post(u, {{"input", replay}, {"tools", responses_tools()}});
    ASSERT_EQ(r3.status, 200) << r3.body;
    EXPECT_EQ(r3.json()["usage"]["input_tokens"], j2["usage"]["input_tokens"]);

    // An id the server never issued: 400 in OpenAI's shape, naming it.
    const json stranger = {{"type", "function_call_output"}, {"call_id", "call_0123456789abcdef0123456789abcdef"},
                           {"output", "x"}};
    expect_openai_400(post(u, {{"input", json::array({stranger})}, {"tools", responses_tools()}}), "input",
                      "call_0123456789abcdef0123456789abcdef");
}

TEST(ServerLiveContinuation, AnthropicToolResultAloneContinuesTheLiveSession) {
    ServerProcess s({}, json::array({kCall, "Fine.</think>Sunny."}));
    const std::string u = s.url() + "/v1/messages";
    const json tools = json::array({{{"name", "get_weather"}, {"input_schema", kSchema}}});
    auto r1 = post(u, {{"max_tokens", 200}, {"tools", tools},
                       {"messages", {{{"role", "user"}, {"content", "weather in Paris?"}}}}});
    ASSERT_EQ(r1.status, 200) << r1.body;
    const json j1 = r1.json();
    std::string id;
    for (const auto& b : j1["content"])
        if (b["type"] == "tool_use") id = b["id"];
    ASSERT_FALSE(id.empty()) << j1;
    const json& u1 = j1["usage"];
    const int turn1 = u1["input_tokens"].get<int>() + u1["cache_read_input_tokens"].get<int>() +
                      u1["output_tokens"].get<int>();

    auto result = [&](const std::string& tool_use_id) {
        return post(u, {{"max_tokens", 200}, {"tools", tools},
                        {"messages", {{{"role", "user"}, {"content", {{{"type", "tool_result"},
                                                                        {"tool_use_id", tool_use_id},
                                                                        {"content", "sunny"}}}}}}}});
    };
    auto r2 = result(id);
    ASSERT_EQ(r2.status, 200) << r2.body;
    EXPECT_GE(r2.json()["usage"]["cache_read_input_tokens"].get<int>(), turn1 - 1) << r2.body;

    auto r3 = result("toolu_0123456789abcdef0123456789abcdef");
    EXPECT_EQ(r3.status, 400) << r3.body;
    const json j3 = r3.json();
    EXPECT_EQ(j3["type"], "error");
    EXPECT_EQ(j3["error"]["type"], "invalid_request_error");
    EXPECT_NE(j3["error"]["message"].get<std::string>().find("toolu_0123456789abcdef0123456789abcdef"),
              std::string::npos);
}

TEST(ServerPreviousResponse, ContinuesTheStoredResponseFromItsLiveSession) {
    ServerProcess s({"--response-store", "3"},
                    json::array({kCall, "Fine.</think>Sunny.", "Good.</think>Bye.", "A.</think>B.", "C.</think>D.",
                                 "E.</think>F.", "G.</think>H."}));
    const std::string u = s.url() + "/v1/responses";
    auto r1 = post(u, {{"input", "weather in Paris?"}, {"tools", responses_tools()}});
    ASSERT_EQ(r1.status, 200) << r1.body;
    const json j1 = r1.json();
    const json output = {{"type", "function_call_output"}, {"call_id", function_call_of(j1)["call_id"]},
                         {"output", "sunny"}};
    // The result by previous_response_id: the stored turn's conversation, then the input.
    auto r2 = post(u, {{"input", json::array({output})}, {"previous_response_id", j1["id"]},
                       {"tools", responses_tools()}});
    ASSERT_EQ(r2.status, 200) << r2.body;
    const json j2 = r2.json();
    EXPECT_EQ(j2["previous_response_id"], j1["id"]);
    EXPECT_GE(cached_of(j2), turn_tokens(j1) - 1) << j2;
    // And a new user message after that answer: again the whole live session is reused.
    auto r3 = post(u, {{"input", "thanks!"}, {"previous_response_id", j2["id"]}, {"tools", responses_tools()}});
    ASSERT_EQ(r3.status, 200) << r3.body;
    EXPECT_GE(cached_of(r3.json()), turn_tokens(j2) - 1) << r3.body;
    EXPECT_EQ(r3.json()["output"].back()["content"][0]["text"], "Bye.");

    expect_openai_400(post(u, {{"input", "x"}, {"previous_response_id", "resp_000000000000000000000000"}}),
                      "previous_response_id", "not found");
    // store: false keeps nothing.
    auto unstored = post(u, {{"input", "x"}, {"store", false}});
    ASSERT_EQ(unstored.status, 200);
    EXPECT_EQ(unstored.json()["store"], false);
    expect_openai_400(post(u, {{"input", "y"}, {"previous_response_id", unstored.json()["id"]}}),
                      "previous_response_id", "not found");
    // --response-store 3: the least recently used go (r1's id and its call id are older
    // than r2, r3 and the two plain responses below).
    auto r4 = post(u, {{"input", "one"}});
    auto r5 = post(u, {{"input", "two"}});
    ASSERT_EQ(r5.status, 200);
    expect_openai_400(post(u, {{"input", "y"}, {"previous_response_id", j1["id"]}}), "previous_response_id",
                      "not found");
    EXPECT_EQ(post(u, {{"input", "z"}, {"previous_response_id", r5.json()["id"]}}).status, 200);
}

// DSML-aware sampling: after a forced tool choice's opening the model is inside a call, where
// every position is structure: at temperature 2 each token is the argmax (top_logprobs[0]),
// seed after seed. Without tools the same sampling does not pick the argmax every time.
TEST(ServerDsmlSampling, ToolCallStructureIsSampledGreedily) {
    ServerProcess s;
    const json tool = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", kSchema}}}};
    int greedy_tokens = 0, free_differs = 0;
    for (int seed = 1; seed <= 6; ++seed) {
        json req = {{"messages", {{{"role", "user"}, {"content", "weather in Paris?"}}}},
                    {"think", false}, {"temperature", 2.0}, {"min_p", 0}, {"seed", seed}, {"max_tokens", 6},
                    {"logprobs", true}, {"top_logprobs", 1}};
        json forced = req;
        forced["tools"] = json::array({tool});
        forced["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
        auto r = post(s.url() + "/v1/chat/completions", forced);
        ASSERT_EQ(r.status, 200) << r.body;
        const json jr = r.json();
        for (const auto& t : jr["choices"][0]["logprobs"]["content"]) {
            EXPECT_EQ(t["bytes"], t["top_logprobs"][0]["bytes"]) << "seed " << seed << ": " << t;
            ++greedy_tokens;
        }
        auto f = post(s.url() + "/v1/chat/completions", req);
        ASSERT_EQ(f.status, 200) << f.body;
        const json jf = f.json();
        for (const auto& t : jf["choices"][0]["logprobs"]["content"])
            if (t["bytes"] != t["top_logprobs"][0]["bytes"]) ++free_differs;
    }
    EXPECT_GE(greedy_tokens, 12);
    EXPECT_GT(free_differs, 0);  // the control: temperature 2 does leave the argmax
}

}  // namespace
}  // namespace ds4::servertest
