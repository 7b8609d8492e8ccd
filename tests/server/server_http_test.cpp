// ds4-server over raw HTTP (curl): routes, each API's response and SSE event shapes with
// scripted output (--test-force-output), the error cases of spec/PRODUCT.md §4.10, the API key,
// prefix reuse, stop sequences, limits, client disconnects and shutdown.
#include <gtest/gtest.h>

#include <optional>
#include <regex>
#include <set>
#include <thread>

#include "server_process.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;

const std::string kDsml = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";
const std::string kThinkText = "<think>Let me think.</think>Hello there!";
// A tool-call block exactly as the model writes it (spec/TOKENIZER_CHAT.md §3).
const std::string kToolCall = "<think>Need the weather.</think>\n\n<" + kDsml + "tool_calls>\n<" + kDsml +
                              "invoke name=\"get_weather\">\n<" + kDsml +
                              "parameter name=\"city\" string=\"true\">Paris &amp; Nice</" + kDsml +
                              "parameter>\n<" + kDsml + "parameter name=\"days\" string=\"false\">3</" +
                              kDsml + "parameter>\n</" + kDsml + "invoke>\n</" + kDsml + "tool_calls>";
const json kExpectedArgs = {{"city", "Paris & Nice"}, {"days", 3}};

json weather_tool() {
    return {{"type", "function"},
            {"function", {{"name", "get_weather"},
                          {"description", "Weather forecast"},
                          {"parameters", {{"type", "object"},
                                          {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "integer"}}}}}}}}}};
}

json with(json a, const json& b) {
    a.update(b);
    return a;
}

json user_chat(const std::string& text) { return {{"messages", {{{"role", "user"}, {"content", text}}}}}; }

std::vector<json> data_events(const std::vector<SseEvent>& ev) {
    std::vector<json> out;
    for (const auto& e : ev)
        if (e.event != "comment" && e.data != "[DONE]") out.push_back(json::parse(e.data));
    return out;
}

TEST(ServerRoutes, HealthModelsMetricsAndUnknownEndpoint) {
    ServerProcess s({"--ctx", "2048"});
    auto h = http("GET", s.url() + "/health");
    EXPECT_EQ(h.status, 200);
    EXPECT_EQ(h.json()["status"], "ok");

    auto m = http("GET", s.url() + "/v1/models");
    ASSERT_EQ(m.status, 200);
    const json models = m.json();
    EXPECT_EQ(models["object"], "list");
    ASSERT_GE(models["data"].size(), 2u);
    EXPECT_EQ(models["data"][0]["id"], "deepseek-v4-flash");
    EXPECT_EQ(models["data"][0]["context_length"], 2048);
    EXPECT_EQ(models["data"][0]["top_provider"]["max_completion_tokens"], 2048);

    auto one = http("GET", s.url() + "/v1/models/deepseek-v4-pro");
    ASSERT_EQ(one.status, 200);
    EXPECT_EQ(one.json()["id"], "deepseek-v4-pro");
    EXPECT_EQ(http("GET", s.url() + "/v1/models/gpt-4").status, 404);

    // The root names the server (clients probe it, often with HEAD).
    auto root = http("GET", s.url() + "/");
    ASSERT_EQ(root.status, 200);
    EXPECT_EQ(root.json()["name"], "ds4-server");
    EXPECT_FALSE(root.json()["version"].get<std::string>().empty());
    auto head = http("HEAD", s.url() + "/");
    EXPECT_EQ(head.status, 200);
    EXPECT_TRUE(head.body.empty());

    auto nf = http("GET", s.url() + "/v1/nothing");
    EXPECT_EQ(nf.status, 404);
    EXPECT_EQ(nf.json()["error"]["message"], "unknown endpoint");

    auto opt = http("OPTIONS", s.url() + "/v1/chat/completions");
    EXPECT_EQ(opt.status, 204);

    ASSERT_EQ(post(s.url() + "/v1/chat/completions", with(user_chat("hi"), {{"max_tokens", 3}})).status, 200);
    auto met = http("GET", s.url() + "/metrics");
    ASSERT_EQ(met.status, 200);
    EXPECT_NE(met.body.find("ds4_requests_total{api=\"chat\"} 1"), std::string::npos) << met.body;
    EXPECT_NE(met.body.find("ds4_generated_tokens_total 3"), std::string::npos) << met.body;
    EXPECT_NE(met.body.find("ds4_queue_depth 0"), std::string::npos);
    EXPECT_NE(met.body.find("# TYPE ds4_decode_tokens_per_second gauge"), std::string::npos);
}

TEST(ServerChat, StreamingReasoningThenContentThenUsage) {
    ServerProcess s({}, json::array({kThinkText}));
    json req = user_chat("hi");
    req["stream"] = true;
    req["stream_options"] = {{"include_usage", true}};
    auto r = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(r.status, 200) << r.body;
    const auto ev = parse_sse(r.body);
    ASSERT_FALSE(ev.empty());
    EXPECT_EQ(ev.front().event, "comment");  // ": prefill" keepalive at the first prefill chunk
    EXPECT_EQ(ev.front().data, " prefill");
    EXPECT_EQ(ev.back().data, "[DONE]");
    const auto chunks = data_events(ev);
    ASSERT_GE(chunks.size(), 4u);
    EXPECT_EQ(chunks[0]["object"], "chat.completion.chunk");
    EXPECT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
    std::string reasoning, content;
    int phase = 0;  // 0 reasoning, 1 content: reasoning never comes after content
    std::string finish;
    for (size_t i = 1; i + 1 < chunks.size(); ++i) {
        const json& c = chunks[i];
        EXPECT_EQ(c["id"], chunks[0]["id"]);
        const json& d = c["choices"][0]["delta"];
        if (d.contains("reasoning_content")) {
            EXPECT_EQ(phase, 0);
            reasoning += d["reasoning_content"].get<std::string>();
        }
        if (d.contains("content")) {
            phase = 1;
            content += d["content"].get<std::string>();
        }
        if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(reasoning, "Let me think.");
    EXPECT_EQ(content, "Hello there!");
    EXPECT_EQ(finish, "stop");
    const json& usage = chunks.back()["usage"];
    EXPECT_TRUE(chunks.back()["choices"].empty());
    EXPECT_GT(usage["prompt_tokens"].get<int>(), 0);
    EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"].get<int>() +
                  usage["prompt_tokens_details"]["cache_write_tokens"].get<int>(),
              usage["prompt_tokens"].get<int>());
    EXPECT_GT(usage["completion_tokens"].get<int>(), 3);
    EXPECT_EQ(usage["total_tokens"], usage["prompt_tokens"].get<int>() + usage["completion_tokens"].get<int>());
}

TEST(ServerChat, ToolCallsStreamedAndNot) {
    ServerProcess s({}, json::array({kToolCall, kToolCall}));
    json req = user_chat("weather in Paris?");
    req["tools"] = json::array({weather_tool()});
    auto r = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    EXPECT_EQ(j["object"], "chat.completion");
    const json& choice = j["choices"][0];
    EXPECT_EQ(choice["finish_reason"], "tool_calls");
    EXPECT_EQ(choice["message"]["reasoning_content"], "Need the weather.");
    ASSERT_EQ(choice["message"]["tool_calls"].size(), 1u);
    const json& call = choice["message"]["tool_calls"][0];
    EXPECT_TRUE(std::regex_match(call["id"].get<std::string>(), std::regex("call_[0-9a-f]{32}")));
    EXPECT_EQ(call["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()), kExpectedArgs);

    req["stream"] = true;
    auto st = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(st.status, 200);
    std::string args, id, finish;
    int headers = 0;
    for (const json& c : data_events(parse_sse(st.body))) {
        const json& d = c["choices"][0]["delta"];
        if (d.contains("tool_calls")) {
            const json& tc = d["tool_calls"][0];
            EXPECT_EQ(tc["index"], 0);
            if (tc.contains("id")) {
                ++headers;
                id = tc["id"];
                EXPECT_EQ(tc["function"]["name"], "get_weather");
                EXPECT_EQ(tc["function"]["arguments"], "");
            } else {
                args += tc["function"]["arguments"].get<std::string>();
            }
        }
        if (!c["choices"][0]["finish_reason"].is_null()) finish = c["choices"][0]["finish_reason"];
    }
    EXPECT_EQ(headers, 1);
    EXPECT_NE(id, call["id"]);  // fresh random ids
    EXPECT_EQ(json::parse(args), kExpectedArgs);
    EXPECT_EQ(finish, "tool_calls");
}

TEST(ServerChat, StopSequenceMaxTokensAndUnterminatedToolCall) {
    const std::string unterminated = "<think>x</think>\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"f\">";
    const std::string malformed = "<think>x</think>\n\n<" + kDsml + "tool_calls>\ngarbage\n</" + kDsml + "tool_calls>";
    ServerProcess s({}, json::array({"<think>a</think>one two STOP three", "<think>a</think>one two three four five",
                                     unterminated, malformed}));
    json req = user_chat("count");
    req["stop"] = "STOP";
    auto r = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.json()["choices"][0]["message"]["content"], "one two ");
    EXPECT_EQ(r.json()["choices"][0]["finish_reason"], "stop");

    json req2 = user_chat("count");
    req2["max_tokens"] = 4;
    auto r2 = post(s.url() + "/v1/chat/completions", req2);
    ASSERT_EQ(r2.status, 200);
    EXPECT_EQ(r2.json()["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(r2.json()["usage"]["completion_tokens"], 4);

    json req3 = user_chat("call");
    req3["tools"] = json::array({weather_tool()});
    auto r3 = post(s.url() + "/v1/chat/completions", req3);
    ASSERT_EQ(r3.status, 200);
    EXPECT_EQ(r3.json()["choices"][0]["finish_reason"], "error");

    // A malformed block is model output, not a server error: the raw text comes back as content.
    auto r4 = post(s.url() + "/v1/chat/completions", req3);
    ASSERT_EQ(r4.status, 200);
    const json m4 = r4.json()["choices"][0];
    EXPECT_EQ(m4["finish_reason"], "stop");
    EXPECT_FALSE(m4["message"].contains("tool_calls"));
    EXPECT_NE(m4["message"]["content"].get<std::string>().find("garbage"), std::string::npos) << m4;
}

TEST(ServerChat, FollowUpRequestReusesThePrefix) {
    ServerProcess s({}, json::array({"Hello there!", "Fine."}));
    json first = user_chat("hi");
    first["thinking"] = {{"type", "disabled"}};
    auto r1 = post(s.url() + "/v1/chat/completions", first);
    ASSERT_EQ(r1.status, 200);
    const json j1 = r1.json();
    EXPECT_EQ(j1["choices"][0]["message"]["content"], "Hello there!");
    const int p1 = j1["usage"]["prompt_tokens"];
    EXPECT_EQ(j1["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

    json second = first;
    second["messages"].push_back({{"role", "assistant"}, {"content", "Hello there!"}});
    second["messages"].push_back({{"role", "user"}, {"content", "how are you?"}});
    auto r2 = post(s.url() + "/v1/chat/completions", second);
    ASSERT_EQ(r2.status, 200);
    const json u2 = r2.json()["usage"];
    // The live session holds prompt 1 + the answer; the second prompt renders the same tokens
    // and then the closing EOS and the new turn, so at least prompt 1 is reused.
    EXPECT_GE(u2["prompt_tokens_details"]["cached_tokens"].get<int>(), p1);
    EXPECT_LT(u2["prompt_tokens_details"]["cache_write_tokens"].get<int>(), u2["prompt_tokens"].get<int>() - p1);
    EXPECT_NE(http("GET", s.url() + "/metrics").body.find("ds4_cache_hits_total 1"), std::string::npos);
}

TEST(ServerCompletions, TextStreamedAndNot) {
    ServerProcess s({}, json::array({"<think>r</think>The end.", "<think>r</think>The end."}));
    auto r = post(s.url() + "/v1/completions", {{"prompt", "Once"}});
    ASSERT_EQ(r.status, 200);
    const json j = r.json();
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_TRUE(std::regex_match(j["id"].get<std::string>(), std::regex("cmpl-[0-9]+")));
    EXPECT_EQ(j["choices"][0]["text"], "The end.");
    EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");

    auto st = post(s.url() + "/v1/completions", {{"prompt", json::array({"Once"})}, {"stream", true}});
    ASSERT_EQ(st.status, 200);
    std::string text;
    const auto ev = parse_sse(st.body);
    EXPECT_EQ(ev.back().data, "[DONE]");
    for (const json& c : data_events(ev)) text += c["choices"][0]["text"].get<std::string>();
    EXPECT_EQ(text, "The end.");
}

TEST(ServerAnthropic, StreamingThinkingAndToolUseEventSequence) {
    ServerProcess s({}, json::array({kToolCall}));
    json req = {{"model", "deepseek-reasoner"}, {"max_tokens", 200}, {"stream", true},
                {"system", json::array({{{"type", "text"}, {"text", "x-anthropic-billing-header: 1"}},
                                        {{"type", "text"}, {"text", "Be brief."}}})},
                {"messages", {{{"role", "user"}, {"content", "weather?"}}}},
                {"tools", {{{"name", "get_weather"}, {"description", "w"},
                            {"input_schema", weather_tool()["function"]["parameters"]}}}}};
    auto r = post(s.url() + "/v1/messages", req);
    ASSERT_EQ(r.status, 200) << r.body;
    std::vector<std::string> names;
    std::string thinking, partial, tool_id;
    json stop;
    for (const auto& e : parse_sse(r.body)) {
        if (e.event == "comment") continue;
        const json d = json::parse(e.data);
        EXPECT_EQ(d["type"], e.event);
        if (e.event == "content_block_delta") {
            const std::string t = d["delta"]["type"];
            if (names.empty() || names.back() != t) names.push_back(t);
            if (t == "thinking_delta") thinking += d["delta"]["thinking"].get<std::string>();
            if (t == "input_json_delta") partial += d["delta"]["partial_json"].get<std::string>();
            if (t == "signature_delta") {
                EXPECT_FALSE(d["delta"]["signature"].get<std::string>().empty());
            }
            continue;
        }
        names.push_back(e.event);
        if (e.event == "message_start") {
            EXPECT_EQ(d["message"]["model"], "deepseek-reasoner");  // the alias asked for
            EXPECT_TRUE(d["message"]["content"].empty());
        }
        if (e.event == "content_block_start" && d["content_block"]["type"] == "tool_use") {
            tool_id = d["content_block"]["id"];
            EXPECT_EQ(d["content_block"]["name"], "get_weather");
        }
        if (e.event == "message_delta") stop = d;
    }
    const std::vector<std::string> expected = {
        "message_start", "content_block_start", "thinking_delta", "signature_delta", "content_block_stop",
        "content_block_start", "input_json_delta", "content_block_stop", "message_delta", "message_stop"};
    EXPECT_EQ(names, expected);
    EXPECT_EQ(thinking, "Need the weather.");
    EXPECT_EQ(json::parse(partial), kExpectedArgs);
    EXPECT_TRUE(std::regex_match(tool_id, std::regex("toolu_[0-9a-f]{32}")));
    EXPECT_EQ(stop["delta"]["stop_reason"], "tool_use");
    EXPECT_GT(stop["usage"]["output_tokens"].get<int>(), 0);
}

// Claude Code asks for thinking: {type: adaptive, display: omitted}: the model still thinks (the
// answer after </think> is the same), but no thinking text is sent, streamed or not; the
// thinking block stays, empty and signed, so the client can hand it back.
TEST(ServerAnthropic, OmittedThinkingDisplaySendsNoThinkingText) {
    ServerProcess s({}, json::array({"<think>Secret reasoning.</think>Sunny.", "<think>Secret reasoning.</think>Sunny."}));
    json req = {{"max_tokens", 100}, {"thinking", {{"type", "adaptive"}, {"display", "omitted"}}},
                {"messages", {{{"role", "user"}, {"content", "weather?"}}}}};
    auto r = post(s.url() + "/v1/messages", req);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    ASSERT_EQ(j["content"].size(), 2u) << j.dump();
    EXPECT_EQ(j["content"][0]["type"], "thinking");
    EXPECT_EQ(j["content"][0]["thinking"], "");
    EXPECT_EQ(j["content"][0]["signature"], j["id"]);
    EXPECT_EQ(j["content"][1]["text"], "Sunny.");
    EXPECT_EQ(r.body.find("Secret"), std::string::npos);

    req["stream"] = true;
    auto st = post(s.url() + "/v1/messages", req);
    ASSERT_EQ(st.status, 200) << st.body;
    EXPECT_EQ(st.body.find("Secret"), std::string::npos);
    EXPECT_EQ(st.body.find("thinking_delta"), std::string::npos);
    EXPECT_NE(st.body.find("\"type\":\"thinking\""), std::string::npos);  // the empty block
    EXPECT_NE(st.body.find("signature_delta"), std::string::npos);
    std::string text;
    for (const auto& e : parse_sse(st.body)) {
        if (e.event != "content_block_delta") continue;
        const json d = json::parse(e.data);
        if (d["delta"]["type"] == "text_delta") text += d["delta"]["text"].get<std::string>();
    }
    EXPECT_EQ(text, "Sunny.");

    req["thinking"]["display"] = "verbose";
    EXPECT_EQ(post(s.url() + "/v1/messages", req).status, 400);
}

TEST(ServerAnthropic, NonStreamingContentAndToolResultHistory) {
    ServerProcess s({}, json::array({"<think>Thought.</think>Sunny, 20 C."}));
    json req = {{"max_tokens", 100},
                {"messages", {{{"role", "user"}, {"content", "weather?"}},
                              {{"role", "assistant"}, {"content", {{{"type", "thinking"}, {"thinking", "t"}, {"signature", "s"}},
                                                                   {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "get_weather"},
                                                                    {"input", {{"city", "Paris"}}}}}}},
                              {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"},
                                                               {"content", "sunny"}}}}}}}};
    auto r = post(s.url() + "/v1/messages", req);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    EXPECT_EQ(j["type"], "message");
    EXPECT_EQ(j["stop_reason"], "end_turn");
    ASSERT_EQ(j["content"].size(), 2u);
    EXPECT_EQ(j["content"][0]["type"], "thinking");
    EXPECT_EQ(j["content"][0]["thinking"], "Thought.");
    EXPECT_EQ(j["content"][0]["signature"], j["id"]);
    EXPECT_EQ(j["content"][1]["text"], "Sunny, 20 C.");
    EXPECT_GT(j["usage"]["input_tokens"].get<int>(), 10);
    EXPECT_EQ(j["usage"]["cache_creation_input_tokens"], 0);

    // count_tokens renders the same prompt without generating.
    auto c = post(s.url() + "/v1/messages/count_tokens", req);
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.json()["input_tokens"], j["usage"]["input_tokens"].get<int>() +
                                            j["usage"]["cache_read_input_tokens"].get<int>());
}

TEST(ServerResponses, StreamingLifecycleWithReasoningSummaryAndFunctionCall) {
    ServerProcess s({}, json::array({kToolCall, "<think>r</think>Hi!"}));
    json req = {{"input", "weather?"}, {"stream", true}, {"reasoning", {{"summary", "auto"}}},
                {"tools", {{{"type", "function"}, {"name", "get_weather"},
                            {"parameters", weather_tool()["function"]["parameters"]}}}}};
    auto r = post(s.url() + "/v1/responses", req);
    ASSERT_EQ(r.status, 200) << r.body;
    std::vector<std::string> types;
    int64_t seq = 0;
    json done;
    for (const auto& e : parse_sse(r.body)) {
        if (e.event == "comment") continue;
        const json d = json::parse(e.data);
        types.push_back(d["type"]);
        // sequence_number comes right after type, counting from 0.
        EXPECT_EQ(e.data.rfind("{\"type\":\"" + d["type"].get<std::string>() + "\",\"sequence_number\":" +
                                   std::to_string(seq) + ",", 0), 0u) << e.data;
        EXPECT_EQ(d["sequence_number"], seq++);
        if (d["type"] == "response.completed") done = d["response"];
    }
    const std::vector<std::string> expected = {
        "response.created", "response.in_progress",
        "response.output_item.added", "response.reasoning_summary_part.added",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.delta", "response.reasoning_summary_text.delta",
        "response.reasoning_summary_text.done", "response.reasoning_summary_part.done",
        "response.output_item.done",
        "response.output_item.added", "response.function_call_arguments.delta",
        "response.function_call_arguments.done", "response.output_item.done", "response.completed"};
    // The number of reasoning deltas depends on tokenization: compare without repeats.
    auto dedup = [](std::vector<std::string> v) {
        v.erase(std::unique(v.begin(), v.end()), v.end());
        return v;
    };
    EXPECT_EQ(dedup(types), dedup(expected));
    ASSERT_EQ(done["output"].size(), 2u);
    EXPECT_EQ(done["output"][0]["type"], "reasoning");
    EXPECT_EQ(done["output"][0]["summary"][0]["text"], "Need the weather.");
    const json& fc = done["output"][1];
    EXPECT_EQ(fc["type"], "function_call");
    EXPECT_TRUE(std::regex_match(fc["id"].get<std::string>(), std::regex("fc_[0-9a-f]{24}")));
    EXPECT_TRUE(std::regex_match(fc["call_id"].get<std::string>(), std::regex("call_[0-9a-f]{32}")));
    EXPECT_EQ(json::parse(fc["arguments"].get<std::string>()), kExpectedArgs);
    EXPECT_TRUE(std::regex_match(done["id"].get<std::string>(), std::regex("resp_[0-9a-f]{24}")));

    // Replaying the call with its output: a plain message answer, no reasoning item (not opted in).
    json req2 = {{"input", {{{"role", "user"}, {"content", "weather?"}},
                            {{"type", "function_call"}, {"call_id", fc["call_id"]}, {"name", "get_weather"},
                             {"arguments", fc["arguments"]}, {"status", "completed"}},
                            {{"type", "function_call_output"}, {"call_id", fc["call_id"]}, {"output", "sunny"}}}}};
    auto r2 = post(s.url() + "/v1/responses", req2);
    ASSERT_EQ(r2.status, 200) << r2.body;
    const json j2 = r2.json();
    EXPECT_EQ(j2["status"], "completed");
    ASSERT_EQ(j2["output"].size(), 1u);
    EXPECT_EQ(j2["output"][0]["content"][0]["text"], "Hi!");
    EXPECT_GT(j2["usage"]["input_tokens_details"]["cached_tokens"].get<int>(), 0);
}

// Every §4.10 client error, with its status and each API's JSON error shape.
TEST(ServerErrors, StatusCodesAndShapes) {
    ServerProcess s({"--ctx", "64", "--max-body", "100000"});
    auto openai_error = [](const HttpResult& r, int status, const std::string& contains) {
        EXPECT_EQ(r.status, status) << r.body;
        const json j = json::parse(r.body, nullptr, false);
        ASSERT_TRUE(j.contains("error")) << r.body;
        EXPECT_EQ(j["error"]["type"], "invalid_request_error") << r.body;
        EXPECT_NE(j["error"]["message"].get<std::string>().find(contains), std::string::npos) << r.body;
    };
    const std::string u = s.url();
    openai_error(http("POST", u + "/v1/chat/completions", "{not json"), 400, "invalid JSON request");
    openai_error(http("POST", u + "/v1/chat/completions", "[1,2]"), 400, "invalid JSON request");
    openai_error(post(u + "/v1/chat/completions", json::object()), 400, "missing messages");
    openai_error(post(u + "/v1/chat/completions", with(user_chat("x"), {{"temperature", "hot"}})), 400, "temperature");
    openai_error(post(u + "/v1/chat/completions", with(user_chat("x"), {{"max_tokens", -1}})), 400, "max_tokens");
    openai_error(post(u + "/v1/chat/completions", {{"messages", {{{"role", "wizard"}, {"content", "x"}}}}}), 400, "role");
    openai_error(post(u + "/v1/completions", json::object()), 400, "missing prompt");
    openai_error(post(u + "/v1/responses", json::object()), 400, "missing input");
    // previous_response_id is served since issue 36; one the server never stored is 400.
    openai_error(post(u + "/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_1"}}), 400,
                 "Previous response with id 'resp_1' not found");
    openai_error(post(u + "/v1/responses", {{"input", "x"}, {"conversation", "c"}}), 400, "conversation is not supported");
    openai_error(post(u + "/v1/responses", {{"input", "x"}, {"tool_choice", "sometimes"}}), 400,
                 "tool_choice=sometimes not supported");
    openai_error(post(u + "/v1/responses", {{"input", "x"}, {"tool_choice", "required"}}), 400,
                 "the request has no tools");
    openai_error(post(u + "/v1/responses", {{"input", "x"}, {"tool_choice", {{"type", "function"}, {"name", "f"}}}}),
                 400, "which is not in tools");
    openai_error(post(u + "/v1/responses", {{"input", {{{"type", "function_call"}, {"status", "in_progress"}}}}}),
                 400, "status");
    openai_error(http("POST", u + "/v1/chat/completions", std::string(200000, ' ')), 413, "request body too large");

    // Context exceeded: OpenAI shape with code, param and the counts.
    const std::string long_text = std::string(400, 'a') + " b c d e f g h i j k l m n o p q r s t u v w x y z";
    auto ctx = post(u + "/v1/chat/completions", user_chat(long_text));
    openai_error(ctx, 400, "configured context size is 64 tokens");
    const json ce = ctx.json()["error"];
    EXPECT_EQ(ce["code"], "context_length_exceeded");
    EXPECT_EQ(ce["param"], "messages");
    EXPECT_EQ(ce["n_ctx"], 64);
    EXPECT_GE(ce["n_prompt_tokens"].get<int>(), 64);
    auto rctx = post(u + "/v1/responses", {{"input", long_text}});
    EXPECT_EQ(rctx.json()["error"]["param"], "input");

    // Anthropic shape.
    auto a = http("POST", u + "/v1/messages", "{nope");
    EXPECT_EQ(a.status, 400);
    EXPECT_EQ(a.json()["type"], "error");
    EXPECT_EQ(a.json()["error"]["type"], "invalid_request_error");
    auto actx = post(u + "/v1/messages", {{"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", long_text}}}}});
    EXPECT_EQ(actx.status, 400);
    EXPECT_EQ(actx.json()["type"], "error");
    EXPECT_NE(actx.json()["error"]["message"].get<std::string>().find("configured context size"), std::string::npos);

    // The server still works after all that.
    EXPECT_EQ(post(u + "/v1/chat/completions", with(user_chat("x"), {{"max_tokens", 2}})).status, 200);
    std::smatch m;
    const std::string metrics = http("GET", u + "/metrics").body;
    ASSERT_TRUE(std::regex_search(metrics, m, std::regex("ds4_request_errors_total ([0-9]+)")));
    EXPECT_GE(std::stoi(m[1]), 18);
}

TEST(ServerAuth, ApiKeyOnEveryRouteButHealth) {
    ServerProcess s({"--api-key", "sekret"});
    const std::string u = s.url();
    EXPECT_EQ(http("GET", u + "/health").status, 200);
    EXPECT_EQ(http("GET", u + "/").status, 200);  // names the server, nothing more
    auto no = http("GET", u + "/v1/models");
    EXPECT_EQ(no.status, 401);
    EXPECT_EQ(no.json()["error"]["code"], "invalid_api_key");
    EXPECT_EQ(http("GET", u + "/v1/models", {}, {"Authorization: Bearer wrong"}).status, 401);
    EXPECT_EQ(http("GET", u + "/metrics").status, 401);
    EXPECT_EQ(http("GET", u + "/v1/models", {}, {"Authorization: Bearer sekret"}).status, 200);
    EXPECT_EQ(http("GET", u + "/v1/models", {}, {"x-api-key: sekret"}).status, 200);
    auto an = post(u + "/v1/messages", {{"messages", {{{"role", "user"}, {"content", "x"}}}}});
    EXPECT_EQ(an.status, 401);
    EXPECT_EQ(an.json()["error"]["type"], "authentication_error");
    auto ok = post(u + "/v1/messages", {{"max_tokens", 2}, {"messages", {{{"role", "user"}, {"content", "x"}}}}},
                   {"x-api-key: sekret"});
    EXPECT_EQ(ok.status, 200);
}

TEST(ServerConcurrency, ParallelStreamsAllCompleteAndDisconnectCancels) {
    ServerProcess s;
    const std::string u = s.url();
    // A client that gives up after 1 s of a long generation: its job must be cancelled.
    std::thread quitter([&] {
        json req = user_chat("go on forever");
        req["stream"] = true;
        req["max_tokens"] = 100000;
        http("POST", u + "/v1/chat/completions", req.dump(), {}, 1.0);
    });
    quitter.join();
    std::vector<std::thread> clients;
    std::vector<HttpResult> results(6);
    for (int i = 0; i < 6; ++i)
        clients.emplace_back([&, i] {
            json req = user_chat("client " + std::to_string(i));
            req["stream"] = i % 2 == 0;
            req["max_tokens"] = 8;
            results[size_t(i)] = post(u + "/v1/chat/completions", req);
        });
    for (auto& t : clients) t.join();
    for (int i = 0; i < 6; ++i) {
        EXPECT_EQ(results[size_t(i)].status, 200) << i;
        if (i % 2 == 0) EXPECT_NE(results[size_t(i)].body.find("data: [DONE]"), std::string::npos);
        else EXPECT_EQ(results[size_t(i)].json()["usage"]["completion_tokens"], 8);
    }
    const std::string m = http("GET", u + "/metrics").body;
    EXPECT_NE(m.find("ds4_active_requests 0"), std::string::npos) << m;
    // 6 x 8 tokens plus what the quitter got before it left: far less than its 100000.
    std::smatch g;
    ASSERT_TRUE(std::regex_search(m, g, std::regex("ds4_generated_tokens_total ([0-9]+)")));
    EXPECT_LT(std::stoi(g[1]), 3000);
}

TEST(ServerSampling, UnseededRequestsDifferSeededOnesRepeat) {
    ServerProcess s;
    auto sample = [&](std::optional<int> seed) {
        json req = user_chat("same prompt");
        req["think"] = false;
        req["max_tokens"] = 12;
        if (seed) req["seed"] = *seed;
        auto r = post(s.url() + "/v1/chat/completions", req);
        EXPECT_EQ(r.status, 200);
        return r.json()["choices"][0]["message"]["content"].get<std::string>();
    };
    EXPECT_EQ(sample(7), sample(7));
    EXPECT_NE(sample(std::nullopt), sample(std::nullopt));  // 12 random tokens from 129k: never equal
}

TEST(ServerShutdown, SigtermEndsTheRunningStreamWithAnErrorAndExitsCleanly) {
    ServerProcess s;
    EXPECT_EQ(http("GET", s.url() + "/health").status, 200);
    HttpResult streamed;
    std::thread client([&] {
        json req = user_chat("go on forever");
        req["stream"] = true;
        req["max_tokens"] = 100000;
        streamed = post(s.url() + "/v1/chat/completions", req);
    });
    // Wait until tokens are flowing, then stop the server.
    for (int i = 0; i < 200; ++i) {
        if (http("GET", s.url() + "/metrics").body.find("ds4_active_requests 1") != std::string::npos) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(s.terminate(), 0) << s.log();
    client.join();
    EXPECT_EQ(streamed.status, 200);
    EXPECT_NE(streamed.body.find("\"finish_reason\":\"error\""), std::string::npos) << streamed.body.substr(0, 500);
    EXPECT_NE(streamed.body.find("data: [DONE]"), std::string::npos);
    EXPECT_NE(s.log().find("shutdown requested"), std::string::npos) << s.log();
}

}  // namespace
}  // namespace ds4::servertest
