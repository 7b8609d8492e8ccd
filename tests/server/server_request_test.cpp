// parse_request (src/server/request.h) without a server: how each API's fields map to the
// internal request (thinking controls and aliases, sampling override, tools in OpenAI form,
// Anthropic blocks, Responses items) and which inputs are rejected. Also the stop scanner.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "chat/output_parser.h"
#include "server/generation.h"
#include "server/http_reader.h"
#include "server/ids.h"
#include "server/request.h"
#include "server/tool_memory.h"
#include "server/writer.h"

namespace ds4::server {
namespace {

using json = nlohmann::ordered_json;
using chat::Role;
using chat::ThinkingMode;

Request parse(Api api, const json& j) { return parse_request(api, j.dump()); }

json with_field(json j, const char* key, const json& value) {
    j[key] = value;
    return j;
}

json chat_body(json extra = json::object()) {
    json j = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
    j.update(extra);
    return j;
}

TEST(ServerRequest, ThinkingControlsAndModelAliases) {
    EXPECT_EQ(parse(Api::Chat, chat_body()).thinking, ThinkingMode::High);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"reasoning_effort", "none"}})).thinking, ThinkingMode::Off);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"reasoning_effort", "max"}})).thinking, ThinkingMode::Max);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"reasoning_effort", "low"}})).thinking, ThinkingMode::High);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"thinking", {{"type", "disabled"}}}})).thinking, ThinkingMode::Off);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"thinking", false}})).thinking, ThinkingMode::Off);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"think", false}})).thinking, ThinkingMode::Off);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"model", "deepseek-chat"}})).thinking, ThinkingMode::Off);
    // An explicit field wins over the alias.
    EXPECT_EQ(parse(Api::Chat, chat_body({{"model", "deepseek-chat"}, {"think", true}})).thinking, ThinkingMode::High);
    // GLM 5.2's ids: the -chat / -nothink / -no-think aliases think off, -reasoner on, with or
    // without the zai/ prefix; the plain id keeps the request's mode.
    for (const char* off : {"glm-5.2-chat", "glm-5.2-nothink", "glm-5.2-no-think", "zai/glm-5.2-chat"})
        EXPECT_EQ(parse(Api::Chat, chat_body({{"model", off}})).thinking, ThinkingMode::Off) << off;
    for (const char* on : {"glm-5.2-reasoner", "zai/glm-5.2-reasoner"})
        EXPECT_EQ(parse(Api::Chat, chat_body({{"model", on}, {"think", false}})).thinking, ThinkingMode::Off) << on;
    EXPECT_EQ(parse(Api::Chat, chat_body({{"model", "zai/glm-5.2-reasoner"}})).thinking, ThinkingMode::High);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"model", "glm-5.2"}, {"think", false}})).thinking, ThinkingMode::Off);
    EXPECT_EQ(listed_models("glm-dsa"), (std::vector<std::string>{"glm-5.2", "zai/glm-5.2"}));
    EXPECT_EQ(listed_models("deepseek4"), (std::vector<std::string>{"deepseek-v4-flash", "deepseek-v4-pro"}));
    EXPECT_EQ(parse(Api::Messages, chat_body({{"output_config", {{"effort", "max"}}}})).thinking, ThinkingMode::Max);
    EXPECT_EQ(parse(Api::Responses, {{"input", "x"}, {"reasoning", {{"effort", "none"}}}}).thinking, ThinkingMode::Off);
    // Codex's lowest effort (model_reasoning_effort = "minimal") means no thinking; the others think.
    EXPECT_EQ(parse(Api::Responses, {{"input", "x"}, {"reasoning", {{"effort", "minimal"}}}}).thinking, ThinkingMode::Off);
    EXPECT_EQ(parse(Api::Chat, chat_body({{"reasoning_effort", "minimal"}})).thinking, ThinkingMode::Off);
    EXPECT_EQ(parse(Api::Responses, {{"input", "x"}, {"reasoning", {{"effort", "xhigh"}}}}).thinking, ThinkingMode::High);
    // previous_response_id and store are read (expanded by server/continuation.h).
    const Request pr = parse(Api::Responses, {{"input", "x"}, {"previous_response_id", "resp_1"}, {"store", false}});
    EXPECT_EQ(pr.previous_response_id, "resp_1");
    EXPECT_FALSE(pr.store);
    EXPECT_TRUE(parse(Api::Responses, {{"input", "x"}}).store);
    EXPECT_THROW(parse(Api::Chat, chat_body({{"reasoning_effort", "extreme"}})), RequestError);
}

TEST(ServerRequest, ExplicitSamplingKnobsApplyWithAndWithoutThinking) {
    const json knobs = {{"temperature", 0.2}, {"top_p", 0.5}, {"top_k", 7}, {"min_p", 0.3}, {"seed", 42}};
    json off = knobs;
    off["think"] = false;
    const Request a = parse(Api::Chat, chat_body(off));
    EXPECT_FLOAT_EQ(a.sampling.temperature, 0.2f);
    EXPECT_FLOAT_EQ(a.sampling.top_p, 0.5f);
    EXPECT_EQ(a.sampling.top_k, 7);
    EXPECT_FLOAT_EQ(a.sampling.min_p, 0.3f);
    EXPECT_EQ(a.sampling.seed, 42u);
    const Request b = parse(Api::Chat, chat_body(knobs));  // thinking: the client's knobs still
    EXPECT_NE(b.thinking, chat::ThinkingMode::Off);
    EXPECT_FLOAT_EQ(b.sampling.temperature, 0.2f);
    EXPECT_FLOAT_EQ(b.sampling.top_p, 0.5f);
    EXPECT_EQ(b.sampling.top_k, 7);
    EXPECT_FLOAT_EQ(b.sampling.min_p, 0.3f);
    EXPECT_EQ(b.sampling.seed, 42u);
    EXPECT_TRUE(b.seed_given);
    // Knobs not set take the defaults, thinking or not.
    const Request c = parse(Api::Chat, chat_body({{"temperature", 0.7}}));
    EXPECT_FLOAT_EQ(c.sampling.temperature, 0.7f);
    EXPECT_FLOAT_EQ(c.sampling.top_p, 1.0f);
    EXPECT_EQ(c.sampling.top_k, 0);
    EXPECT_FLOAT_EQ(c.sampling.min_p, 0.05f);
}

TEST(ServerRequest, ChatMessagesToolsAndLimits) {
    const json j = {
        {"messages", {{{"role", "developer"}, {"content", "dev"}},
                      {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "a"}}, "b"}}},
                      {{"role", "assistant"}, {"content", nullptr}, {"reasoning_content", "r"},
                       {"tool_calls", {{{"id", "call_1"}, {"function", {{"name", "f"}, {"arguments", {{"z", 1}, {"a", 2}}}}}}}}},
                      {{"role", "tool"}, {"tool_call_id", "call_1"}, {"content", "out"}}}},
        {"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", json::object()}}}},
                   {{"name", "bare"}, {"parameters", json::object()}}}},
        {"max_completion_tokens", 9}, {"max_tokens", 5}, {"stop", {"x", ""}}, {"stream", true},
        {"stream_options", {{"include_usage", true}}}};
    const Request r = parse(Api::Chat, j);
    ASSERT_EQ(r.messages.size(), 4u);
    EXPECT_EQ(r.messages[0].role, Role::System);
    EXPECT_EQ(r.messages[1].content, "ab");
    EXPECT_EQ(r.messages[2].reasoning, "r");
    ASSERT_EQ(r.messages[2].tool_calls.size(), 1u);
    EXPECT_EQ(r.messages[2].tool_calls[0].arguments, R"({"z":1,"a":2})");  // raw JSON, key order kept
    EXPECT_EQ(r.messages[3].role, Role::Tool);
    EXPECT_EQ(r.messages[3].tool_call_id, "call_1");
    const json tools = json::parse(r.tools_json);
    ASSERT_EQ(tools.size(), 2u);
    EXPECT_EQ(tools[1]["type"], "function");
    EXPECT_EQ(tools[1]["function"]["name"], "bare");
    EXPECT_EQ(r.max_tokens, 9);
    EXPECT_EQ(r.stop, std::vector<std::string>{"x"});
    EXPECT_TRUE(r.stream);
    EXPECT_TRUE(r.include_usage);

    json none = j;
    none["tool_choice"] = "none";
    EXPECT_TRUE(parse(Api::Chat, none).tools_json.empty());
}

TEST(ServerRequest, LogprobsFields) {
    EXPECT_EQ(parse_request(Api::Chat, R"({"messages":[{"content":"x"}]})").logprobs, -1);
    EXPECT_EQ(parse_request(Api::Chat, R"({"messages":[{"content":"x"}],"logprobs":false})").logprobs, -1);
    EXPECT_EQ(parse_request(Api::Chat, R"({"messages":[{"content":"x"}],"logprobs":true})").logprobs, 0);
    EXPECT_EQ(parse_request(Api::Chat, R"({"messages":[{"content":"x"}],"logprobs":true,"top_logprobs":20})").logprobs,
              20);
    EXPECT_EQ(parse_request(Api::Completions, R"({"prompt":"x","logprobs":3})").logprobs, 3);
    EXPECT_EQ(parse_request(Api::Completions, R"({"prompt":"x","logprobs":null})").logprobs, -1);
}

TEST(ServerRequest, ResponseFormatSchemaGoesToThePrompt) {
    const json schema = {{"type", "object"}, {"properties", {{"a", {{"type", "integer"}}}}}};
    const Request c = parse(Api::Chat, chat_body({{"response_format", {{"type", "json_schema"},
                                                                        {"json_schema", {{"name", "x"}, {"schema", schema}}}}}}));
    EXPECT_EQ(json::parse(c.response_format_json), schema);
    EXPECT_TRUE(parse(Api::Chat, chat_body({{"response_format", {{"type", "json_object"}}}})).response_format_json.empty());
    const Request r = parse(Api::Responses, {{"input", "x"}, {"text", {{"format", {{"type", "json_schema"}, {"schema", schema}}}}}});
    EXPECT_EQ(json::parse(r.response_format_json), schema);
}

TEST(ServerRequest, AnthropicBlocks) {
    const json j = {
        {"system", {{{"type", "text"}, {"text", "x-anthropic-billing-header: cc"}}, {{"type", "text"}, {"text", "S"}}}},
        {"messages", {{{"role", "user"}, {"content", "q"}},
                      {{"role", "assistant"}, {"content", {{{"type", "thinking"}, {"thinking", "t"}},
                                                           {{"type", "text"}, {"text", "calling"}},
                                                           {{"type", "tool_use"}, {"id", "toolu_1"}, {"name", "f"}, {"input", {{"a", 1}}}},
                                                           {{"type", "tool_use"}, {"id", "toolu_2"}, {"name", "g"}, {"input", json::object()}}}}},
                      {{"role", "user"}, {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_1"}, {"content", "r1"}},
                                                      {{"type", "tool_result"}, {"tool_use_id", "toolu_2"},
                                                       {"content", {{{"type", "text"}, {"text", "r2"}}}}},
                                                      {{"type", "text"}, {"text", "go on"}}}}}}},
        {"tools", {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}, {{"type", "web_search_20250305"}, {"name", "ws"}}}},
        {"stop_sequences", {"END"}}, {"max_tokens", 3}};
    const Request r = parse(Api::Messages, j);
    ASSERT_EQ(r.messages.size(), 6u);
    EXPECT_EQ(r.messages[0].role, Role::System);
    EXPECT_EQ(r.messages[0].content, "S");  // the billing header is not prompt text
    EXPECT_EQ(r.messages[2].reasoning, "t");
    EXPECT_EQ(r.messages[2].content, "calling");
    ASSERT_EQ(r.messages[2].tool_calls.size(), 2u);
    EXPECT_EQ(r.messages[2].tool_calls[0].arguments, R"({"a":1})");
    EXPECT_EQ(r.messages[3].tool_call_id, "toolu_1");
    EXPECT_EQ(r.messages[4].content, "r2");
    EXPECT_EQ(r.messages[5].content, "go on");
    const json tools = json::parse(r.tools_json);
    ASSERT_EQ(tools.size(), 1u);  // the server tool has no schema to render
    EXPECT_EQ(tools[0]["function"]["parameters"]["type"], "object");
    EXPECT_EQ(r.stop, std::vector<std::string>{"END"});
    EXPECT_EQ(r.max_tokens, 3);
    EXPECT_THROW(parse(Api::Messages, {{"messages", {{{"role", "user"}, {"content", {{{"type", "image"}}}}}}}}),
                 RequestError);
}

TEST(ServerRequest, ResponsesItems) {
    const json j = {
        {"instructions", "I"},
        {"input", {{{"role", "user"}, {"content", {{{"type", "input_text"}, {"text", "q"}}}}},
                   {{"type", "reasoning"}, {"summary", {{{"type", "summary_text"}, {"text", "thought"}}}}},
                   {{"type", "function_call"}, {"call_id", "call_1"}, {"name", "f"}, {"arguments", "{\"a\":1}"}},
                   {{"type", "function_call"}, {"call_id", "call_2"}, {"name", "g"}, {"arguments", "{}"}},
                   {{"type", "function_call_output"}, {"call_id", "call_1"}, {"output", "o1"}},
                   {{"type", "web_search_call"}, {"status", "completed"}},
                   {{"type", "message"}, {"role", "assistant"}, {"content", {{{"type", "output_text"}, {"text", "done"}}}}}}},
        {"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", json::object()}, {"strict", true}},
                   {{"type", "namespace"}, {"name", "ns"}, {"tools", {{{"type", "function"}, {"name", "g"}}}}}}},
        {"max_output_tokens", 11}, {"reasoning", {{"summary", "detailed"}}}};
    const Request r = parse(Api::Responses, j);
    ASSERT_EQ(r.messages.size(), 5u);
    EXPECT_EQ(r.messages[0].content, "I");
    EXPECT_EQ(r.messages[2].role, Role::Assistant);
    EXPECT_EQ(r.messages[2].reasoning, "thought");
    ASSERT_EQ(r.messages[2].tool_calls.size(), 2u);
    EXPECT_EQ(r.messages[3].content, "o1");
    EXPECT_EQ(r.messages[4].content, "done");
    ASSERT_EQ(r.tools.size(), 2u);
    EXPECT_EQ(r.tools[1].ns, "ns");
    EXPECT_FALSE(json::parse(r.tools_json)[0]["function"].contains("strict"));
    EXPECT_EQ(r.max_tokens, 11);
    EXPECT_TRUE(r.reasoning_summary);
}

TEST(ServerResponsesWriter, CustomToolCallsCarryTheRawInput) {
    const Request r = parse(Api::Responses, {{"input", "patch it"},
                                              {"tools", {{{"type", "custom"}, {"name", "apply_patch"}, {"description", "d"}}}}});
    ASSERT_EQ(r.tools.size(), 1u);
    EXPECT_TRUE(r.tools[0].custom);
    const json fn = json::parse(r.tools_json)[0]["function"];
    EXPECT_EQ(fn["parameters"]["required"], json::array({"input"}));
    // The model calls it like a function; the client sees a custom_tool_call with the raw input.
    auto w = make_writer(r, {.model = "m", .seq = 1, .created = 0});
    std::string out;
    using K = chat::OutputEvent::Kind;
    w->begin({}, out);
    w->event({K::ToolCallBegin, "apply_patch", 0}, out);
    w->event({K::ToolArguments, R"({"input": "*** Begin Patch\n"})", 0}, out);
    w->event({K::ToolCallEnd, "", 0}, out);
    FinishInfo f;
    f.reason = Finish::ToolCalls;
    w->finish(f, out);
    const json body = json::parse(out);
    ASSERT_EQ(body["output"].size(), 1u);
    const json& item = body["output"][0];
    EXPECT_EQ(item["type"], "custom_tool_call");
    EXPECT_EQ(item["name"], "apply_patch");
    EXPECT_EQ(item["input"], "*** Begin Patch\n");
    EXPECT_EQ(item["id"].get<std::string>().rfind("ctc_", 0), 0u);
}

TEST(ServerRequest, RejectionsCarryStatusAndParam) {
    auto error_of = [](Api api, const std::string& body) -> RequestError {
        try {
            parse_request(api, body);
        } catch (const RequestError& e) {
            return e;
        }
        ADD_FAILURE() << "accepted: " << body;
        return RequestError(0, "");
    };
    EXPECT_EQ(error_of(Api::Chat, "{").status, 400);
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[]})").param, "messages");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":"hi"})").param, "messages");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":"x"}],"top_p":2})").param, "top_p");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":"x"}],"stream":"yes"})").param, "stream");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":"x"}],"stop":[1]})").param, "stop");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":{"a":1}}]})").status, 400);
    EXPECT_EQ(error_of(Api::Completions, R"({"prompt":5})").param, "prompt");
    EXPECT_EQ(std::string(error_of(Api::Responses, R"({"input":[]})").what()), "missing input");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":"x"}],"n":2})").param, "n");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":"x"}],"logprobs":1})").param, "logprobs");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":"x"}],"top_logprobs":3})").param, "top_logprobs");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":"x"}],"logprobs":true,"top_logprobs":21})").param,
              "top_logprobs");
    EXPECT_EQ(error_of(Api::Completions, R"({"prompt":"x","logprobs":-1})").param, "logprobs");
    EXPECT_EQ(error_of(Api::Chat, R"({"messages":[{"content":"x"}],"response_format":{"type":"grammar"}})").param,
              "response_format");
    EXPECT_EQ(std::string(error_of(Api::Responses, R"({"input":"x","tool_choice":"sometimes"})").what()),
              "tool_choice=sometimes not supported");
    EXPECT_EQ(std::string(error_of(Api::Responses, R"({"input":"x","tool_choice":{"type":"web_search_preview"}})").what()),
              "tool_choice type 'web_search_preview' not supported");
}

TEST(ServerRequest, ForcedToolChoiceOfEveryApi) {
    using M = ToolChoice::Mode;
    const json fn = {{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}};
    const json chat = chat_body({{"tools", {fn}}});
    auto chat_with = [&](const json& choice) { return parse(Api::Chat, with_field(chat, "tool_choice", choice)); };
    EXPECT_EQ(parse(Api::Chat, chat).tool_choice.mode, M::Auto);
    EXPECT_EQ(chat_with("auto").tool_choice.mode, M::Auto);
    EXPECT_EQ(chat_with("required").tool_choice.mode, M::Required);
    const Request named = chat_with({{"type", "function"}, {"function", {{"name", "get_weather"}}}});
    EXPECT_EQ(named.tool_choice.mode, M::Named);
    EXPECT_EQ(named.tool_choice.name, "get_weather");
    EXPECT_EQ(chat_with({{"type", "allowed_tools"}, {"allowed_tools", {{"mode", "required"}}}}).tool_choice.mode,
              M::Required);
    const Request none = chat_with("none");
    EXPECT_EQ(none.tool_choice.mode, M::None);
    EXPECT_TRUE(none.tools_json.empty());

    const json responses = {{"input", "x"},
                            {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}}};
    EXPECT_EQ(parse(Api::Responses, with_field(responses, "tool_choice", "required")).tool_choice.mode, M::Required);
    const Request rn = parse(Api::Responses, with_field(responses, "tool_choice", {{"type", "function"}, {"name", "get_weather"}}));
    EXPECT_EQ(rn.tool_choice.mode, M::Named);
    EXPECT_EQ(rn.tool_choice.name, "get_weather");

    const json messages = {{"max_tokens", 5},
                           {"messages", {{{"role", "user"}, {"content", "x"}}}},
                           {"tools", {{{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}}}}};
    EXPECT_EQ(parse(Api::Messages, with_field(messages, "tool_choice", {{"type", "auto"}})).tool_choice.mode, M::Auto);
    EXPECT_EQ(parse(Api::Messages, with_field(messages, "tool_choice", {{"type", "any"}})).tool_choice.mode, M::Required);
    const Request an = parse(Api::Messages, with_field(messages, "tool_choice", {{"type", "tool"}, {"name", "get_weather"}}));
    EXPECT_EQ(an.tool_choice.mode, M::Named);
    EXPECT_EQ(an.tool_choice.name, "get_weather");
    EXPECT_TRUE(parse(Api::Messages, with_field(messages, "tool_choice", {{"type", "none"}})).tools_json.empty());

    // A name that is not a tool, or a required call without tools: 400 naming tool_choice.
    for (const auto& [api, body] :
         {std::pair{Api::Chat, with_field(chat, "tool_choice", {{"type", "function"}, {"function", {{"name", "nope"}}}})},
          std::pair{Api::Responses, with_field(responses, "tool_choice", {{"type", "function"}, {"name", "nope"}})},
          std::pair{Api::Messages, with_field(messages, "tool_choice", {{"type", "tool"}, {"name", "nope"}})},
          std::pair{Api::Chat, with_field(chat_body(), "tool_choice", "required")},
          std::pair{Api::Messages, with_field(with_field(messages, "tools", json::array()), "tool_choice", {{"type", "any"}})}}) {
        try {
            parse(api, body);
            ADD_FAILURE() << "accepted: " << body.dump();
        } catch (const RequestError& e) {
            EXPECT_EQ(e.status, 400);
            EXPECT_EQ(e.param, "tool_choice") << e.what();
        }
    }
}

RequestError rejection(Api api, std::string_view body) {
    try {
        parse_request(api, body);
    } catch (const RequestError& e) {
        return e;
    }
    ADD_FAILURE() << "accepted: " << body.substr(0, 200);
    return RequestError(0, "");
}

// Issue 22 item 1: 100,000 levels of nesting used to overflow the stack in the JSON library's
// recursive copy; the depth is bounded before parsing.
TEST(ServerRequestLimits, DeepNestingIsRefusedBeforeParsing) {
    const size_t deep = 100000;
    const std::string body = R"({"messages":[{"role":"user","content":"x"}],"a":)" + std::string(deep, '[') +
                             std::string(deep, ']') + "}";
    for (Api api : {Api::Chat, Api::Completions, Api::Messages, Api::Responses}) {
        const RequestError e = rejection(api, body);
        EXPECT_EQ(e.status, 400);
        EXPECT_NE(std::string(e.what()).find("nested deeper than 128 levels"), std::string::npos) << e.what();
    }
    // Exactly at the limit is fine (the body object is level 1).
    const std::string at_limit = R"({"messages":[{"role":"user","content":"x"}],"a":)" +
                                 std::string(kMaxJsonDepth - 1, '[') + std::string(kMaxJsonDepth - 1, ']') + "}";
    EXPECT_NO_THROW(parse_request(Api::Chat, at_limit));
    EXPECT_EQ(rejection(Api::Chat, "{\"a\":" + std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']') + "}").status,
              400);
    // Brackets inside strings (escaped quotes included) are text, not nesting.
    EXPECT_TRUE(json_depth_within(R"({"a":"[[[[\"[[[[","b":[1]})", 2));
    EXPECT_FALSE(json_depth_within(R"({"a":"x\\","b":[[1]]})", 2));
    EXPECT_TRUE(json_depth_within("[[]][[]]", 2));
}

// Issue 22 item 7: a parse error used to echo the whole bad input (20 MB in, 20 MB out).
TEST(ServerRequestLimits, ErrorMessagesQuoteAFewHundredBytesAtMost) {
    const std::string big(2 << 20, 'x');
    const std::vector<std::string> bodies = {
        "{\"messages\": \"" + big,                                               // unterminated string
        "{\"messages\": " + big + "}",                                           // bad literal
        R"({"messages":[{"role":")" + big + R"(","content":"x"}]})",             // unknown role
        R"({"messages":[{"content":"x"}],"reasoning_effort":")" + big + "\"}",  // unknown effort
        R"({"model":")" + big + R"(","messages":[{"content":"x"}]})",           // unknown model
    };
    for (const auto& b : bodies) {
        const RequestError e = rejection(Api::Chat, b);
        EXPECT_GE(e.status, 400);
        EXPECT_LE(std::string(e.what()).size(), 4 * kMaxEchoBytes + 32) << std::string(e.what()).substr(0, 300);
    }
    // Cut at a UTF-8 boundary, with the full size said.
    const std::string euro = "\xe2\x82\xac";  // 3 bytes
    std::string text;
    for (int i = 0; i < 10; ++i) text += euro;
    EXPECT_EQ(cap_text(text, 7), euro + euro + "... (30 bytes)");
    EXPECT_EQ(cap_text("short", 7), "short");
}

// Issue 22 item 19: an unknown model used to be served (200); the docs promise 404.
TEST(ServerRequestLimits, UnknownModelIs404InEveryApiAliasesAreAccepted) {
    const std::vector<std::pair<Api, json>> bodies = {
        {Api::Chat, chat_body()},
        {Api::Completions, {{"prompt", "x"}}},
        {Api::Messages, chat_body()},
        {Api::Responses, {{"input", "x"}}}};
    for (const auto& [api, body] : bodies) {
        json b = body;
        b["model"] = "gpt-4o";
        const RequestError e = rejection(api, b.dump());
        EXPECT_EQ(e.status, 404) << to_string(api);
        EXPECT_EQ(e.param, "model");
        EXPECT_EQ(e.code, "model_not_found");
        EXPECT_NE(std::string(e.what()).find("'gpt-4o' not found"), std::string::npos);
        for (const char* ok : {"deepseek-v4-flash", "deepseek-v4-pro", "deepseek-chat", "deepseek-reasoner", "glm-5.2",
                               "zai/glm-5.2", "glm-5.2-reasoner", ""}) {
            b["model"] = ok;
            EXPECT_NO_THROW(parse(api, b)) << ok;
        }
        b.erase("model");
        EXPECT_NO_THROW(parse(api, b));
    }
}

// Issue 22 item 19: a tool whose schema is not an object (`parameters: 5`) used to be accepted
// and rendered into the prompt.
TEST(ServerRequestLimits, ToolSchemasMustBeObjects) {
    const json bad_chat = chat_body({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", 5}}}}}}});
    const json bad_bare = chat_body({{"tools", {{{"name", "f"}, {"parameters", "{}"}}}}});
    const json bad_desc = chat_body({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}, {"description", 5}}}}}}});
    const json bad_anthropic = chat_body({{"tools", {{{"name", "f"}, {"input_schema", 5}}}}});
    const json bad_responses = {{"input", "x"}, {"tools", {{{"type", "function"}, {"name", "f"}, {"parameters", json::array()}}}}};
    const json bad_namespace = {{"input", "x"}, {"tools", {{{"type", "namespace"}, {"name", "n"},
                                                           {"tools", {{{"name", "g"}, {"parameters", true}}}}}}}};
    for (const auto& [api, body] : std::vector<std::pair<Api, json>>{{Api::Chat, bad_chat},
                                                                     {Api::Chat, bad_bare},
                                                                     {Api::Chat, bad_desc},
                                                                     {Api::Messages, bad_anthropic},
                                                                     {Api::Responses, bad_responses},
                                                                     {Api::Responses, bad_namespace}}) {
        const RequestError e = rejection(api, body.dump());
        EXPECT_EQ(e.status, 400) << body;
        EXPECT_EQ(e.param, "tools") << body;
    }
    // No schema, or null, is still fine.
    EXPECT_NO_THROW(parse(Api::Chat, chat_body({{"tools", {{{"type", "function"}, {"function", {{"name", "f"}}}}}}})));
    EXPECT_NO_THROW(parse(Api::Chat, chat_body({{"tools", {{{"type", "function"},
                                                            {"function", {{"name", "f"}, {"parameters", nullptr}}}}}}})));
}

// Issue 22 item 13: the Anthropic writer used to report a failed generation as end_turn.
TEST(ServerAnthropicWriter, AFailureIsAnErrorEventOrAnErrorStatus) {
    const Request r = parse(Api::Messages, chat_body());
    FinishInfo f;
    f.reason = Finish::Error;
    f.error = "shutdown requested";
    f.error_status = 503;
    using K = chat::OutputEvent::Kind;
    for (bool stream : {true, false}) {
        Request rs = r;
        rs.stream = stream;
        auto w = make_writer(rs, {.model = "m", .seq = 1, .created = 0});
        std::string out;
        w->begin({}, out);
        w->event({K::Content, "partial", 0}, out);
        w->finish(f, out);
        if (stream) {
            EXPECT_EQ(w->status(f), 200);  // the status line went out long ago
            EXPECT_NE(out.find("event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\","
                               "\"message\":\"shutdown requested\"}}"), std::string::npos) << out;
            EXPECT_EQ(out.find("message_stop"), std::string::npos) << out;
            EXPECT_EQ(out.find("end_turn"), std::string::npos) << out;
        } else {
            EXPECT_EQ(w->status(f), 503);
            const json body = json::parse(out);
            EXPECT_EQ(body["type"], "error");
            EXPECT_EQ(body["error"]["message"], "shutdown requested");
        }
    }
    // A normal end is still 200 / message_stop.
    FinishInfo ok;
    auto w = make_writer(r, {.model = "m", .seq = 1, .created = 0});
    EXPECT_EQ(w->status(ok), 200);
}

// The HTTP request reader (issue 22 items 6, 20): limits hold however the bytes arrive.
struct ReadResult {
    HttpRequestReader::State state;
    int status;
    std::string body;
};
ReadResult read_request(const HttpLimits& limits, const std::string& bytes, size_t piece) {
    HttpRequestReader r(limits);
    for (size_t at = 0; at < bytes.size() && r.state() != HttpRequestReader::State::Done &&
                        r.state() != HttpRequestReader::State::Failed;
         at += piece)
        r.feed(std::string_view(bytes).substr(at, piece));
    return {r.state(), r.error_status(), r.state() == HttpRequestReader::State::Done ? r.request().body : ""};
}

TEST(ServerHttpReader, LimitsHoldWholeAndBytewise) {
    using S = HttpRequestReader::State;
    const HttpLimits limits{.max_header_bytes = 200, .max_header_fields = 5, .max_body = 100};
    auto both = [&](const std::string& bytes, S state, int status, const std::string& body = {}) {
        for (size_t piece : {bytes.size(), size_t(1), size_t(7)}) {
            const ReadResult r = read_request(limits, bytes, piece);
            EXPECT_EQ(r.state, state) << piece << ": " << bytes.substr(0, 80);
            EXPECT_EQ(r.status, status) << piece << ": " << bytes.substr(0, 80);
            EXPECT_EQ(r.body, body) << piece;
        }
    };
    // A header of exactly 200 bytes passes; 201 does not (start line and fields together).
    const std::string start = "GET /health HTTP/1.1\r\nHost: x\r\nX-Pad: ";
    const std::string tail = "\r\n\r\n";
    const std::string exact = start + std::string(200 - start.size() - tail.size(), 'a') + tail;
    ASSERT_EQ(exact.size(), 200u);
    both(exact, S::Done, 0);
    both(start + std::string(201 - start.size() - tail.size(), 'a') + tail, S::Failed, 431);
    // A long request line with short fields is still counted whole.
    both("GET /" + std::string(150, 'p') + " HTTP/1.1\r\nHost: x\r\nX-A: " + std::string(40, 'b') + "\r\n\r\n",
         S::Failed, 431);
    // Field count.
    both("GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n", S::Done, 0);
    both("GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\nF: 1\r\n\r\n", S::Failed, 431);
    // Bodies: Content-Length and chunked, at and over the limit.
    const std::string post = "POST /v1/messages HTTP/1.1\r\nHost: x\r\n";
    both(post + "Content-Length: 100\r\n\r\n" + std::string(100, 'z'), S::Done, 0, std::string(100, 'z'));
    both(post + "Content-Length: 101\r\n\r\n", S::Failed, 413);
    both(post + "Transfer-Encoding: chunked\r\n\r\n32\r\n" + std::string(50, 'c') + "\r\n32\r\n" + std::string(50, 'd') +
             "\r\n0\r\n\r\n",
         S::Done, 0, std::string(50, 'c') + std::string(50, 'd'));
    both(post + "Transfer-Encoding: chunked\r\n\r\n32\r\n" + std::string(50, 'c') + "\r\n33\r\n" + std::string(51, 'd') +
             "\r\n0\r\n\r\n",
         S::Failed, 413);
    both(post + "Transfer-Encoding: chunked\r\n\r\n1;" + std::string(300, 'e') + "\r\nx\r\n0\r\n\r\n", S::Failed, 400);
    // No framing on a method with a body: 411 as soon as the header is in.
    for (const char* m : {"POST", "PUT", "PATCH"}) both(std::string(m) + " /v1/messages HTTP/1.1\r\nHost: x\r\n\r\n", S::Failed, 411);
    both("GET /health HTTP/1.1\r\nHost: x\r\n\r\n", S::Done, 0);
    both("garbage\r\n\r\n", S::Failed, 400);

    HttpRequestReader r(limits);
    EXPECT_EQ(r.feed(post + "Expect: 100-continue\r\nContent-Length: 2\r\n\r\n"), S::Body);
    EXPECT_TRUE(r.expects_continue());
    EXPECT_EQ(r.request().path, "/v1/messages");
    EXPECT_EQ(r.request().header("expect"), "100-continue");
    EXPECT_EQ(r.feed("{}"), S::Done);
    HttpRequestReader cut(limits);
    cut.feed(post + "Content-Length: 5\r\n\r\nab");
    EXPECT_EQ(cut.eof(), S::Failed);
    EXPECT_EQ(cut.error_status(), 400);
    HttpRequestReader hint(limits);
    hint.feed("POST /v1/messages?beta=true HTTP/1.1\r\nX: " + std::string(300, 'x'));
    EXPECT_EQ(hint.state(), S::Failed);
    EXPECT_EQ(hint.path_hint(), "/v1/messages");  // the error goes out in the Anthropic shape
}

TEST(ServerStopScanner, HoldsBackPartialStopsAndCutsAtTheFirst) {
    StopScanner s({"END", "XY"});
    std::string out = s.feed("abcE");
    out += s.feed("N");
    EXPECT_EQ(out, "abc");  // "EN" may start "END"
    out += s.feed("Dzzz");
    EXPECT_TRUE(s.hit());
    EXPECT_EQ(s.stop(), "END");
    EXPECT_EQ(out, "abc");
    EXPECT_EQ(s.feed("more"), "");

    StopScanner t({"END"});
    std::string shown = t.feed("aE");
    shown += t.feed("Nb");
    shown += t.flush();
    EXPECT_EQ(shown, "aENb");
    EXPECT_FALSE(t.hit());
    StopScanner none({});
    EXPECT_EQ(none.feed("END"), "END");
}

TEST(ServerIds, FormatsAndUniqueness) {
    const std::string a = openai_call_id(), b = openai_call_id();
    EXPECT_EQ(a.size(), 5u + 32u);
    EXPECT_EQ(a.rfind("call_", 0), 0u);
    EXPECT_NE(a, b);
    EXPECT_EQ(anthropic_tool_id().size(), 6u + 32u);
    EXPECT_EQ(responses_id("fc_").size(), 3u + 24u);
    EXPECT_EQ(a.find_first_not_of("0123456789abcdef", 5), std::string::npos);
}

TEST(ServerToolMemory, LruDedupAndReplayCheck) {
    const std::string d = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";
    const std::string block = "\n\n<" + d + "tool_calls>\n<" + d + "invoke name=\"f\">\n<" + d +
                              "parameter name=\"a\" string=\"false\"> 1 </" + d + "parameter>\n</" + d +
                              "invoke>\n<" + d + "invoke name=\"g\">\n\n</" + d + "invoke>\n</" + d + "tool_calls>";
    ToolMemory m([](std::string_view b) { return chat::parse_output(b, {.thinking = false, .tools = true}); }, 3);
    m.put("call_1", block);
    m.put("call_2", block);
    EXPECT_EQ(m.size(), 2u);
    EXPECT_EQ(m.bytes(), block.size());  // one copy for both ids
    const std::vector<std::string> both = {"call_1", "call_2"};
    EXPECT_EQ(m.block_for(both), block);
    EXPECT_EQ(m.entries_for(std::vector<std::string>{"call_2", "nope"}),
              (std::vector<std::pair<std::string, std::string>>{{"call_2", block}}));

    // replay: only for exactly the calls the block holds (arguments compared as JSON).
    const std::vector<chat::ToolCall> calls = {{"call_1", "f", R"({"a": 1})"}, {"call_2", "g", "{}"}};
    EXPECT_EQ(m.replay(calls), block);
    EXPECT_FALSE(m.replay({{"call_1", "f", R"({"a": 2})"}, {"call_2", "g", "{}"}}));
    EXPECT_FALSE(m.replay({{"call_1", "f", R"({"a": 1})"}}));          // one call missing
    EXPECT_FALSE(m.replay({{"call_1", "f", R"({"a": 1})"}, {"call_9", "g", "{}"}}));  // unknown id

    m.put("call_3", "other");
    EXPECT_FALSE(m.block_for(std::vector<std::string>{"call_1", "call_3"}));  // different blocks
    // LRU: call_1 and call_2 were used after call_3 was put? No: call_3 is newest; using
    // call_1 makes call_2 the oldest, and a fourth id evicts it.
    EXPECT_TRUE(m.block_for(std::vector<std::string>{"call_1"}));
    m.put("call_4", "x");
    EXPECT_EQ(m.size(), 3u);
    EXPECT_TRUE(m.entries_for(std::vector<std::string>{"call_2"}).empty());
    EXPECT_EQ(m.entries_for(std::vector<std::string>{"call_1"}).size(), 1u);
    EXPECT_EQ(m.bytes(), block.size() + 5 + 1);
    m.put("call_5", "y");  // evicts call_3 ("other")
    m.put("call_6", "z");  // evicts call_1: the block goes with its last id
    EXPECT_EQ(m.bytes(), 3u);
}

}  // namespace
}  // namespace ds4::server
