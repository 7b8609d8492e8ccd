// ds4-server on a GLM 5.2 model (issue 32 item 1): ds4-gguf-gen's GLM tiny preset behind every
// API; /v1/models lists GLM's ids; tool calls the model writes in GLM's syntax
// (<tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value></tool_call>, scripted with
// --test-force-output) come out as OpenAI and Anthropic tool calls with arguments typed by the
// request's tool schemas, streamed and whole; exact tool replay parses the remembered block
// with the same typing; unset sampling fields take GLM's defaults (top-p 0.95, min-p 0).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "server/request.h"
#include "server_process.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;

// A zip code is a string by its schema but would parse as a number without one.
json weather_tool() {
    return json::parse(R"({"type": "function", "function": {"name": "get_weather", "description": "Weather forecast",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "zip": {"type": "string"},
                                                        "days": {"type": "integer"}}}}})");
}

const std::string kCall =
    "<tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value><arg_key>zip</arg_key>"
    "<arg_value>75001</arg_value><arg_key>days</arg_key><arg_value>3</arg_value></tool_call>";
const json kArgs = {{"city", "Paris"}, {"zip", "75001"}, {"days", 3}};

json user_chat(const std::string& text) {
    return {{"model", "glm-5.2-chat"}, {"messages", {{{"role", "user"}, {"content", text}}}}};
}

std::vector<json> data_events(const std::string& body) {
    std::vector<json> out;
    for (const auto& e : parse_sse(body))
        if (e.event != "comment" && e.data != "[DONE]") out.push_back(json::parse(e.data));
    return out;
}

std::vector<std::string> glm_args(std::vector<std::string> extra = {}) {
    std::vector<std::string> a = {"-m", glm_model(), "--ctx", "1024"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
}

TEST(ServerGlm, ModelsListsGlmIds) {
    ServerProcess s(glm_args());
    auto r = http("GET", s.url() + "/v1/models");
    ASSERT_EQ(r.status, 200) << r.body;
    const json body = r.json();
    std::vector<std::string> ids;
    for (const auto& m : body["data"]) {
        ids.push_back(m["id"]);
        EXPECT_EQ(m["name"], "GLM 5.2") << r.body;
    }
    EXPECT_EQ(ids, (std::vector<std::string>{"glm-5.2", "zai/glm-5.2"})) << r.body;
    EXPECT_EQ(http("GET", s.url() + "/v1/models/glm-5.2").status, 200);
}

TEST(ServerGlm, EveryApiAnswers) {
    ServerProcess s(glm_args());
    auto chat = post(s.url() + "/v1/chat/completions", {{"model", "glm-5.2"},
                                                        {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                                                        {"max_tokens", 6}});
    ASSERT_EQ(chat.status, 200) << chat.body;
    EXPECT_EQ(chat.json()["model"], "glm-5.2");
    EXPECT_EQ(chat.json()["usage"]["completion_tokens"].get<int>() <= 6, true) << chat.body;
    EXPECT_GT(chat.json()["usage"]["prompt_tokens"].get<int>(), 5) << chat.body;

    json streamed = user_chat("Hi");
    streamed["stream"] = true;
    streamed["max_tokens"] = 6;
    auto st = post(s.url() + "/v1/chat/completions", streamed);
    ASSERT_EQ(st.status, 200) << st.body;
    const auto events = data_events(st.body);
    ASSERT_FALSE(events.empty()) << st.body;
    EXPECT_FALSE(events.back()["choices"][0]["finish_reason"].is_null()) << st.body;

    auto comp = post(s.url() + "/v1/completions", {{"model", "glm-5.2"}, {"prompt", "Once upon"}, {"max_tokens", 5}});
    ASSERT_EQ(comp.status, 200) << comp.body;
    EXPECT_TRUE(comp.json()["choices"][0]["text"].is_string()) << comp.body;

    auto msg = post(s.url() + "/v1/messages", {{"model", "zai/glm-5.2"},
                                               {"max_tokens", 5},
                                               {"messages", {{{"role", "user"}, {"content", "Hi"}}}}});
    ASSERT_EQ(msg.status, 200) << msg.body;
    EXPECT_EQ(msg.json()["type"], "message");
    const json usage = msg.json()["usage"];  // input_tokens leaves out the cached ones
    EXPECT_GT(usage["input_tokens"].get<int>() + usage["cache_read_input_tokens"].get<int>(), 5) << msg.body;

    auto rs = post(s.url() + "/v1/responses", {{"model", "glm-5.2-reasoner"}, {"input", "Hi"}, {"max_output_tokens", 5}});
    ASSERT_EQ(rs.status, 200) << rs.body;
    EXPECT_EQ(rs.json()["object"], "response");
}

TEST(ServerGlm, ToolCallsInGlmSyntaxBecomeTypedToolCalls) {
    ServerProcess s(glm_args(), json::array({kCall, kCall, kCall, "\n" + kCall}));
    json req = user_chat("weather in Paris?");
    req["tools"] = json::array({weather_tool()});
    auto r = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(r.status, 200) << r.body;
    const json c = r.json()["choices"][0];
    EXPECT_EQ(c["finish_reason"], "tool_calls") << c;
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << c;
    EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()), kArgs);
    EXPECT_TRUE(c["message"]["content"].is_null() || c["message"]["content"] == "") << c;

    // Streamed: the argument fragments join to the same object.
    req["stream"] = true;
    auto st = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(st.status, 200) << st.body;
    std::string name, args, finish;
    for (const json& e : data_events(st.body)) {
        if (e["choices"].empty()) continue;
        const json& ch = e["choices"][0];
        if (ch.contains("finish_reason") && !ch["finish_reason"].is_null()) finish = ch["finish_reason"];
        if (!ch["delta"].contains("tool_calls")) continue;
        const json& f = ch["delta"]["tool_calls"][0]["function"];
        if (f.contains("name")) name += f["name"].get<std::string>();
        if (f.contains("arguments")) args += f["arguments"].get<std::string>();
    }
    EXPECT_EQ(name, "get_weather") << st.body;
    EXPECT_EQ(json::parse(args), kArgs) << st.body;
    EXPECT_EQ(finish, "tool_calls");

    // Anthropic: a tool_use block with the typed input.
    json m = {{"model", "glm-5.2-chat"},
              {"max_tokens", 100},
              {"messages", {{{"role", "user"}, {"content", "weather?"}}}},
              {"tools", {{{"name", "get_weather"}, {"input_schema", weather_tool()["function"]["parameters"]}}}}};
    auto a = post(s.url() + "/v1/messages", m);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.json()["stop_reason"], "tool_use") << a.body;
    const json content = a.json()["content"];
    ASSERT_EQ(content.size(), 1u) << content;
    EXPECT_EQ(content[0]["type"], "tool_use");
    EXPECT_EQ(content[0]["name"], "get_weather");
    EXPECT_EQ(content[0]["input"], kArgs);

    // Responses: a function_call item (the whitespace before the block is not content).
    json rq = {{"model", "glm-5.2-chat"},
               {"input", "weather?"},
               {"tools", {{{"type", "function"}, {"name", "get_weather"},
                           {"parameters", weather_tool()["function"]["parameters"]}}}}};
    auto rs = post(s.url() + "/v1/responses", rq);
    ASSERT_EQ(rs.status, 200) << rs.body;
    const json out = rs.json()["output"];
    ASSERT_EQ(out.size(), 1u) << out;
    EXPECT_EQ(out[0]["type"], "function_call");
    EXPECT_EQ(out[0]["name"], "get_weather");
    EXPECT_EQ(json::parse(out[0]["arguments"].get<std::string>()), kArgs);
}

// Turn 1 calls the tool in a block the canonical rendering would write differently (newlines
// between the tags); turn 2 sends the call back. Returns turn 2's cached tokens and turn 1's
// prompt + completion tokens.
std::pair<int, int> tool_round_trip(const std::vector<std::string>& extra) {
    const std::string sampled = "\n<tool_call>get_weather\n<arg_key>zip</arg_key>\n<arg_value>75001</arg_value>\n"
                                "<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";
    ServerProcess s(glm_args(extra), json::array({sampled, "Sunny."}));
    json req = user_chat("weather in 75001 for 3 days?");
    req["tools"] = json::array({weather_tool()});
    auto r1 = post(s.url() + "/v1/chat/completions", req);
    EXPECT_EQ(r1.status, 200) << r1.body;
    const json j1 = r1.json();
    const json msg = j1["choices"][0]["message"];
    EXPECT_EQ(j1["choices"][0]["finish_reason"], "tool_calls") << j1;
    EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
              json({{"zip", "75001"}, {"days", 3}}));
    req["messages"].push_back(msg);
    req["messages"].push_back({{"role", "tool"}, {"tool_call_id", msg["tool_calls"][0]["id"]}, {"content", "sunny"}});
    auto r2 = post(s.url() + "/v1/chat/completions", req);
    EXPECT_EQ(r2.status, 200) << r2.body;
    const json u1 = j1["usage"], u2 = r2.json()["usage"];
    return {u2["prompt_tokens_details"]["cached_tokens"].get<int>(),
            u1["prompt_tokens"].get<int>() + u1["completion_tokens"].get<int>()};
}

TEST(ServerGlm, ExactToolReplayTypesTheBlockByTheRequestsTools) {
    // The remembered block parses back to {"zip": "75001", ...} only with the request's
    // schema (without it, 75001 is a number and the client's call would not match), so the
    // second prompt starts with exactly turn 1's tokens.
    const auto [cached, turn1] = tool_round_trip({});
    EXPECT_GE(cached, turn1 - 1);
    EXPECT_LE(cached, turn1);
    // The canonical rendering diverges at the first newline inside the block.
    const auto [canonical_cached, canonical_turn1] = tool_round_trip({"--disable-exact-dsml-tool-replay"});
    EXPECT_LT(canonical_cached, canonical_turn1 - 5);
}

TEST(ServerGlmRequest, SamplingDefaultsFillOnlyTheUnsetFields) {
    const chat::SamplingDefaults glm{.temperature = 1.0f, .top_p = 0.95f, .min_p = 0.0f};
    const json off = {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"think", false}};
    server::Request a = server::parse_request(server::Api::Chat, off.dump());
    server::apply_sampling_defaults(a, glm);
    EXPECT_FLOAT_EQ(a.sampling.temperature, 1.0f);
    EXPECT_FLOAT_EQ(a.sampling.top_p, 0.95f);
    EXPECT_FLOAT_EQ(a.sampling.min_p, 0.0f);
    json set = off;
    set.update({{"temperature", 0.3}, {"top_p", 0.5}, {"min_p", 0.2}});
    server::Request b = server::parse_request(server::Api::Chat, set.dump());
    server::apply_sampling_defaults(b, glm);
    EXPECT_FLOAT_EQ(b.sampling.temperature, 0.3f);
    EXPECT_FLOAT_EQ(b.sampling.top_p, 0.5f);
    EXPECT_FLOAT_EQ(b.sampling.min_p, 0.2f);
    // Thinking: the client's knobs still apply (issue 36), and the unset ones take the format's
    // defaults as without thinking.
    json think = set;
    think["think"] = true;
    server::Request c = server::parse_request(server::Api::Chat, think.dump());
    server::apply_sampling_defaults(c, glm);
    EXPECT_FLOAT_EQ(c.sampling.temperature, 0.3f);
    EXPECT_FLOAT_EQ(c.sampling.top_p, 0.5f);
    EXPECT_FLOAT_EQ(c.sampling.min_p, 0.2f);
    json think_unset = off;
    think_unset["think"] = true;
    think_unset["temperature"] = 0.6;
    server::Request d = server::parse_request(server::Api::Chat, think_unset.dump());
    server::apply_sampling_defaults(d, glm);
    EXPECT_FLOAT_EQ(d.sampling.temperature, 0.6f);
    EXPECT_FLOAT_EQ(d.sampling.top_p, 0.95f);
    EXPECT_FLOAT_EQ(d.sampling.min_p, 0.0f);
}

TEST(ServerGlm, UnsetSamplingFieldsTakeGlmsDefaults) {
    ServerProcess s(glm_args());
    auto text = [&](json extra) {
        json req = user_chat("Tell me a story");
        req["seed"] = 17;
        req["max_tokens"] = 24;
        req.update(extra);
        auto r = post(s.url() + "/v1/chat/completions", req);
        EXPECT_EQ(r.status, 200) << r.body;
        return r.json()["choices"][0]["message"]["content"].dump();
    };
    const std::string defaults = text(json::object());
    EXPECT_EQ(defaults, text({{"temperature", 1.0}, {"top_p", 0.95}, {"min_p", 0.0}}));
    EXPECT_EQ(defaults, text({{"top_p", 0.95}}));
    EXPECT_NE(defaults, text({{"top_p", 1.0}, {"min_p", 0.05}}));  // DeepSeek V4's
}

}  // namespace
}  // namespace ds4::servertest
