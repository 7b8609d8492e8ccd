// ds4-server client fidelity (issue 23 items 4 and 6) against a real server on loopback with
// the tiny model and scripted output (--test-force-output): forced tool choice in every API,
// reasoning-token usage and Anthropic cache accounting, lenient JSON bodies and HEAD, the
// --trace file, and exact DSML tool replay (spec/PRODUCT.md §4.3-§4.10).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>
#include <sstream>

#include "server_process.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;

const std::string kDsml = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";
const std::string kParamCity = "<" + kDsml + "parameter name=\"city\" string=\"true\">Paris</" + kDsml + "parameter>\n";
const std::string kCallTail = kParamCity + "</" + kDsml + "invoke>\n</" + kDsml + "tool_calls>";
const std::string kInvoke = "<" + kDsml + "invoke name=\"get_weather\">\n";

json weather_tool() {
    return {{"type", "function"},
            {"function", {{"name", "get_weather"},
                          {"description", "Weather forecast"},
                          {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
}

json user_chat(const std::string& text) { return {{"messages", {{{"role", "user"}, {"content", text}}}}}; }

std::vector<json> data_events(const std::string& body) {
    std::vector<json> out;
    for (const auto& e : parse_sse(body))
        if (e.event != "comment" && e.data != "[DONE]") out.push_back(json::parse(e.data));
    return out;
}

// --- Item 1: forced tool choice ------------------------------------------------------------

TEST(ServerToolChoice, NamedAndRequiredStartTheReplyWithTheToolCall) {
    // The forced outputs are what the model writes after the forced opening: for a named tool
    // the parameters, for "required" the invoke as well.
    ServerProcess s({}, json::array({kCallTail, kCallTail, kInvoke + kCallTail, "<think>r</think>Hi."}));
    json req = user_chat("weather?");
    req["tools"] = json::array({weather_tool()});
    req["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
    auto r = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(r.status, 200) << r.body;
    const json c = r.json()["choices"][0];
    EXPECT_EQ(c["finish_reason"], "tool_calls") << c;
    EXPECT_FALSE(c["message"].contains("reasoning_content")) << c;  // thinking was closed first
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << c;
    EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "get_weather");
    EXPECT_EQ(json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>()),
              json({{"city", "Paris"}}));
    const int forced_prompt = r.json()["usage"]["prompt_tokens"];

    // Streamed: after the role chunk, the first delta is the tool call's header.
    req["stream"] = true;
    auto st = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(st.status, 200);
    const auto chunks = data_events(st.body);
    ASSERT_GE(chunks.size(), 3u);
    const json& first = chunks[1]["choices"][0]["delta"];
    ASSERT_TRUE(first.contains("tool_calls")) << chunks[1];
    EXPECT_EQ(first["tool_calls"][0]["function"]["name"], "get_weather");

    json required = user_chat("weather?");
    required["tools"] = json::array({weather_tool()});
    required["tool_choice"] = "required";
    auto rr = post(s.url() + "/v1/chat/completions", required);
    ASSERT_EQ(rr.status, 200);
    EXPECT_EQ(rr.json()["choices"][0]["finish_reason"], "tool_calls") << rr.body;
    EXPECT_EQ(rr.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"], "get_weather");

    // The opening is part of the prompt: the same request with auto has fewer prompt tokens.
    required.erase("tool_choice");
    auto ra = post(s.url() + "/v1/chat/completions", required);
    ASSERT_EQ(ra.status, 200);
    EXPECT_GE(forced_prompt, ra.json()["usage"]["prompt_tokens"].get<int>() + 5);
}

TEST(ServerToolChoice, AnthropicAndResponsesShapes) {
    ServerProcess s({}, json::array({kCallTail, kInvoke + kCallTail}));
    const json anthropic_tool = {{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}};
    json m = {{"max_tokens", 50},
              {"messages", {{{"role", "user"}, {"content", "weather?"}}}},
              {"tools", {anthropic_tool}},
              {"tool_choice", {{"type", "tool"}, {"name", "get_weather"}}}};
    auto a = post(s.url() + "/v1/messages", m);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.json()["stop_reason"], "tool_use");
    const json content = a.json()["content"];
    ASSERT_EQ(content.size(), 1u) << content;
    EXPECT_EQ(content[0]["type"], "tool_use");
    EXPECT_EQ(content[0]["input"], json({{"city", "Paris"}}));

    // Unknown tool: 400 in Anthropic's shape.
    m["tool_choice"] = {{"type", "tool"}, {"name", "nope"}};
    auto bad = post(s.url() + "/v1/messages", m);
    EXPECT_EQ(bad.status, 400);
    EXPECT_EQ(bad.json()["type"], "error");
    EXPECT_EQ(bad.json()["error"]["type"], "invalid_request_error");

    json rq = {{"input", "weather?"},
               {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", {{"type", "object"}}}}}},
               {"tool_choice", "required"}};
    auto rs = post(s.url() + "/v1/responses", rq);
    ASSERT_EQ(rs.status, 200) << rs.body;
    const json out = rs.json()["output"];
    ASSERT_EQ(out.size(), 1u) << out;
    EXPECT_EQ(out[0]["type"], "function_call");
    EXPECT_EQ(out[0]["name"], "get_weather");
    EXPECT_EQ(rs.json()["tool_choice"], "required");

    // Unknown tool: 400 in OpenAI's shape.
    rq["tool_choice"] = {{"type", "function"}, {"name", "nope"}};
    auto rbad = post(s.url() + "/v1/responses", rq);
    EXPECT_EQ(rbad.status, 400);
    EXPECT_EQ(rbad.json()["error"]["param"], "tool_choice");
}

TEST(ServerToolChoice, CountTokensCountsTheForcedOpening) {
    // count_tokens must count the prompt a generation evaluates: with a forced choice that
    // includes "</think>\n\n<tool_calls>\n" and, for a named tool, the invoke line.
    ServerProcess s({}, json::array({kCallTail}));
    const json anthropic_tool = {{"name", "get_weather"}, {"input_schema", {{"type", "object"}}}};
    json m = {{"max_tokens", 50},
              {"messages", {{{"role", "user"}, {"content", "weather?"}}}},
              {"tools", {anthropic_tool}}};
    auto count_of = [&](const json& req) {
        auto c = post(s.url() + "/v1/messages/count_tokens", req);
        EXPECT_EQ(c.status, 200) << c.body;
        return c.json()["input_tokens"].get<int>();
    };
    const int plain = count_of(m);
    m["tool_choice"] = {{"type", "auto"}};
    EXPECT_EQ(count_of(m), plain);
    m["tool_choice"] = {{"type", "any"}};
    const int any = count_of(m);
    EXPECT_GE(any, plain + 4);
    m["tool_choice"] = {{"type", "tool"}, {"name", "get_weather"}};
    const int named = count_of(m);
    EXPECT_GE(named, any + 4);

    auto a = post(s.url() + "/v1/messages", m);
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.json()["stop_reason"], "tool_use") << a.body;
    const json u = a.json()["usage"];
    EXPECT_EQ(u["input_tokens"].get<int>() + u["cache_read_input_tokens"].get<int>() +
                  u["cache_creation_input_tokens"].get<int>(),
              named);

    // A forced choice naming a tool not in tools is refused here too.
    m["tool_choice"] = {{"type", "tool"}, {"name", "nope"}};
    EXPECT_EQ(post(s.url() + "/v1/messages/count_tokens", m).status, 400);
}

// --- Item 2: usage ------------------------------------------------------------------------

TEST(ServerUsage, ReasoningTokensAndAnthropicCacheAccounting) {
    // "<think>" (1 token) + reasoning + "</think>" (1 token) are reasoning; the answer is not.
    const std::string think = "<think>Let me think about it a while.</think>Hello there, friend!";
    ServerProcess s({}, json::array({think, think, think, "Plain answer, no thinking at all.", think, think}));
    auto r = post(s.url() + "/v1/chat/completions", user_chat("hi"));
    ASSERT_EQ(r.status, 200);
    const json u = r.json()["usage"];
    const int reasoning = u["completion_tokens_details"]["reasoning_tokens"];
    EXPECT_GE(reasoning, 4);
    EXPECT_LE(reasoning, u["completion_tokens"].get<int>() - 3);  // "Hello there, friend!" is >= 3 tokens

    // The same text streamed and in the other OpenAI APIs: the same count.
    json st = user_chat("hi");
    st["stream"] = true;
    st["stream_options"] = {{"include_usage", true}};
    auto sr = post(s.url() + "/v1/chat/completions", st);
    EXPECT_EQ(data_events(sr.body).back()["usage"]["completion_tokens_details"]["reasoning_tokens"], reasoning);
    auto rr = post(s.url() + "/v1/responses", {{"input", "hi"}});
    ASSERT_EQ(rr.status, 200);
    EXPECT_EQ(rr.json()["usage"]["output_tokens_details"]["reasoning_tokens"], reasoning);

    json off = user_chat("hi");
    off["thinking"] = {{"type", "disabled"}};
    auto ro = post(s.url() + "/v1/chat/completions", off);
    EXPECT_EQ(ro.json()["usage"]["completion_tokens_details"]["reasoning_tokens"], 0);

    // Anthropic: input_tokens are the uncached prompt tokens, cache reads the reused ones,
    // and the three add up to the prompt.
    const json m = {{"max_tokens", 100}, {"messages", {{{"role", "user"}, {"content", "hello"}}}}};
    auto a1 = post(s.url() + "/v1/messages", m);
    ASSERT_EQ(a1.status, 200) << a1.body;
    const json u1 = a1.json()["usage"];
    auto count = post(s.url() + "/v1/messages/count_tokens", m);
    const int prompt = count.json()["input_tokens"];
    EXPECT_EQ(u1["input_tokens"].get<int>() + u1["cache_read_input_tokens"].get<int>(), prompt);
    EXPECT_EQ(u1["cache_creation_input_tokens"], 0);
    auto a2 = post(s.url() + "/v1/messages", m);  // the same prompt again: nearly all cached
    const json u2 = a2.json()["usage"];
    EXPECT_GE(u2["cache_read_input_tokens"].get<int>(), prompt - 1);
    EXPECT_EQ(u2["input_tokens"].get<int>(), prompt - u2["cache_read_input_tokens"].get<int>());
}

// --- Item 3: lenient bodies and HEAD ----------------------------------------------------------

TEST(ServerHttp, AnyContentTypeWithoutOriginAndLargeBodies) {
    ServerProcess s({}, json::array({"<think>r</think>A.", "<think>r</think>B.", "<think>r</think>C.",
                                     "<think>r</think>D."}));
    // A long (100 KB) message in a body with no Content-Type, text/plain or a form type.
    json big = user_chat(std::string(100000, 'a'));
    big["max_tokens"] = 8;
    for (const char* type : {"Content-Type:", "Content-Type: text/plain",
                             "Content-Type: application/x-www-form-urlencoded"}) {
        const auto r = http("POST", s.url() + "/v1/chat/completions", user_chat("hi").dump(), {type});
        EXPECT_EQ(r.status, 200) << type << " " << r.body;
        EXPECT_EQ(r.json()["object"], "chat.completion") << type;
    }
    const auto large = http("POST", s.url() + "/v1/messages/count_tokens",
                            json{{"messages", {{{"role", "user"}, {"content", std::string(100000, 'a')}}}}}.dump(),
                            {"Content-Type: text/plain"});
    EXPECT_EQ(large.status, 200) << large.body;
    EXPECT_GT(large.json()["input_tokens"].get<int>(), 1000);
    // Still JSON: anything else is a 400 JSON error, not a 415.
    const auto junk = http("POST", s.url() + "/v1/chat/completions", "a=1&b=2", {"Content-Type: application/x-www-form-urlencoded"});
    EXPECT_EQ(junk.status, 400);
    EXPECT_NE(junk.body.find("invalid JSON request"), std::string::npos);
}

TEST(ServerHttp, HeadAnswersLikeGetWithoutTheBody) {
    ServerProcess s;
    for (const std::string path : {"/health", "/v1/models", "/v1/models/deepseek-v4-flash", "/metrics"}) {
        const auto get = http("GET", s.url() + path);
        ASSERT_EQ(get.status, 200) << path;
        RawConnection c(s.url());
        ASSERT_TRUE(c.send("HEAD " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
        const std::string raw = c.read_all(5);
        EXPECT_EQ(status_of(raw), 200) << path << raw;
        const size_t end = raw.find("\r\n\r\n");
        ASSERT_NE(end, std::string::npos) << raw;
        EXPECT_EQ(raw.size(), end + 4) << "a body after the header: " << raw;
        const std::string header = raw.substr(0, end);
        EXPECT_NE(header.find("Content-Type: " + get.header("Content-Type")), std::string::npos) << header;
        if (path != "/metrics")  // the metrics text changes between the two requests
            EXPECT_NE(header.find("Content-Length: " + std::to_string(get.body.size())), std::string::npos) << header;
        else
            EXPECT_NE(header.find("Content-Length: "), std::string::npos) << header;
    }
    RawConnection c(s.url());
    ASSERT_TRUE(c.send("HEAD /v1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
    const std::string raw = c.read_all(5);
    EXPECT_EQ(status_of(raw), 404);
    EXPECT_EQ(raw.size(), raw.find("\r\n\r\n") + 4) << raw;
}

// --- Item 4: --trace ---------------------------------------------------------------------

std::vector<json> read_lines(const std::string& path) {
    std::ifstream in(path);
    std::vector<json> out;
    for (std::string line; std::getline(in, line);) out.push_back(json::parse(line));
    return out;
}

TEST(ServerTrace, RequestsAndResponsesAsJsonLinesWithKeysRedacted) {
    const auto dir = std::filesystem::temp_directory_path() / ("ds4-trace-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::string path = (dir / "trace.jsonl").string();
    std::filesystem::remove(path);
    {
        ServerProcess s({"--trace", path, "--api-key", "sekret-key"},
                        json::array({"<think>r</think>Plain.", "<think>r</think>Streamed."}));
        ASSERT_EQ(post(s.url() + "/v1/chat/completions", user_chat("one"), {"Authorization: Bearer sekret-key"}).status, 200);
        json st = user_chat("two");
        st["stream"] = true;
        const auto sr = post(s.url() + "/v1/chat/completions", st, {"x-api-key: sekret-key"});
        ASSERT_EQ(sr.status, 200);
        EXPECT_EQ(http("GET", s.url() + "/health").status, 200);
        EXPECT_EQ(http("GET", s.url() + "/v1/nothing", {}, {"Authorization: Bearer sekret-key"}).status, 404);

        const auto lines = read_lines(path);
        std::string all;
        for (const json& l : lines) all += l.dump();
        EXPECT_EQ(all.find("sekret-key"), std::string::npos) << "a key in the trace";
        std::map<int, std::vector<json>> by_seq;
        for (const json& l : lines) {
            EXPECT_TRUE(l.contains("time") && l.contains("t")) << l;
            by_seq[l["seq"].get<int>()].push_back(l);
        }
        ASSERT_EQ(by_seq.size(), 4u) << all;
        const auto& plain = by_seq[1];
        ASSERT_EQ(plain.size(), 2u);
        EXPECT_EQ(plain[0]["type"], "request");
        EXPECT_EQ(plain[0]["method"], "POST");
        EXPECT_EQ(plain[0]["target"], "/v1/chat/completions");
        EXPECT_EQ(json::parse(plain[0]["body"].get<std::string>()), user_chat("one"));
        bool redacted = false;
        for (const json& h : plain[0]["headers"])
            if (h[0] == "authorization") redacted = h[1] == "[redacted]";
        EXPECT_TRUE(redacted) << plain[0];
        EXPECT_EQ(plain[1]["type"], "response");
        EXPECT_EQ(plain[1]["status"], 200);
        EXPECT_EQ(json::parse(plain[1]["body"].get<std::string>())["choices"][0]["message"]["content"], "Plain.");

        // The stream: one event line per SSE record as the client got them, then the end.
        const auto& stream = by_seq[2];
        ASSERT_GE(stream.size(), 4u);
        EXPECT_EQ(stream[1]["type"], "stream");
        std::string events;
        size_t n = 0;
        for (size_t i = 2; i + 1 < stream.size(); ++i) {
            EXPECT_EQ(stream[i]["type"], "event");
            events += stream[i]["data"].get<std::string>();
            ++n;
        }
        EXPECT_EQ(events, sr.body);
        EXPECT_EQ(n, parse_sse(sr.body).size());
        EXPECT_EQ(stream.back()["type"], "end");
        EXPECT_EQ(stream.back()["complete"], true);
        EXPECT_EQ(by_seq[3][0]["target"], "/health");
        EXPECT_EQ(by_seq[4][1]["status"], 404);
    }
    // A trace file that cannot be opened is a startup error.
    try {
        ServerProcess bad({"--trace", (dir / "missing" / "trace.jsonl").string()});
        ADD_FAILURE() << "started";
    } catch (const std::exception& e) {
        EXPECT_NE(std::string(e.what()).find("--trace: cannot open"), std::string::npos) << e.what();
    }
    std::filesystem::remove_all(dir);
}

// --- Item 5: exact tool replay -------------------------------------------------------------

// The model's block differs from the canonical rendering: " 3 " for 3, and a parameter
// without its string attribute (canonical: string="true"), in a different argument order.
const std::string kSampledCall = "Need the weather.</think>\n\n<" + kDsml + "tool_calls>\n" + kInvoke + "<" + kDsml +
                                 "parameter name=\"days\" string=\"false\"> 3 </" + kDsml + "parameter>\n<" + kDsml +
                                 "parameter name=\"city\">Paris</" + kDsml + "parameter>\n</" + kDsml + "invoke>\n</" +
                                 kDsml + "tool_calls>";

// Turn 1 calls the tool; turn 2 sends the call back with its result. Returns the cached
// tokens of turn 2 and the first turn's prompt + completion tokens.
std::pair<int, int> tool_round_trip(const std::vector<std::string>& args) {
    ServerProcess s(args, json::array({kSampledCall, "Sunny."}));
    json req = user_chat("weather in Paris for 3 days?");
    req["tools"] = json::array({weather_tool()});
    auto r1 = post(s.url() + "/v1/chat/completions", req);
    EXPECT_EQ(r1.status, 200) << r1.body;
    const json j1 = r1.json();
    const json msg = j1["choices"][0]["message"];
    EXPECT_EQ(j1["choices"][0]["finish_reason"], "tool_calls") << j1;
    EXPECT_EQ(json::parse(msg["tool_calls"][0]["function"]["arguments"].get<std::string>()),
              json({{"days", 3}, {"city", "Paris"}}));
    req["messages"].push_back(msg);
    req["messages"].push_back({{"role", "tool"}, {"tool_call_id", msg["tool_calls"][0]["id"]}, {"content", "sunny"}});
    auto r2 = post(s.url() + "/v1/chat/completions", req);
    EXPECT_EQ(r2.status, 200) << r2.body;
    const json u1 = j1["usage"], u2 = r2.json()["usage"];
    return {u2["prompt_tokens_details"]["cached_tokens"].get<int>(),
            u1["prompt_tokens"].get<int>() + u1["completion_tokens"].get<int>()};
}

TEST(ServerToolReplay, TheSampledBlockIsRenderedBackExactly) {
    // The live session holds turn 1's prompt and all its sampled tokens but (at most) the
    // last; with exact replay the second prompt starts with exactly those tokens.
    const auto [cached, turn1] = tool_round_trip({});
    EXPECT_GE(cached, turn1 - 1);
    EXPECT_LE(cached, turn1);

    // Canonical re-rendering diverges inside the block (at " 3 ").
    const auto [canonical_cached, canonical_turn1] = tool_round_trip({"--disable-exact-dsml-tool-replay"});
    EXPECT_LT(canonical_cached, canonical_turn1 - 5);
}

TEST(ServerToolReplay, AnEditedCallIsRenderedCanonically) {
    ServerProcess s({}, json::array({kSampledCall, "Sunny."}));
    json req = user_chat("weather in Paris for 3 days?");
    req["tools"] = json::array({weather_tool()});
    auto r1 = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(r1.status, 200);
    const json j1 = r1.json();
    json msg = j1["choices"][0]["message"];
    msg["tool_calls"][0]["function"]["arguments"] = json({{"days", 4}, {"city", "Paris"}}).dump();
    req["messages"].push_back(msg);
    req["messages"].push_back({{"role", "tool"}, {"tool_call_id", msg["tool_calls"][0]["id"]}, {"content", "sunny"}});
    auto r2 = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(r2.status, 200);
    const int turn1 = j1["usage"]["prompt_tokens"].get<int>() + j1["usage"]["completion_tokens"].get<int>();
    EXPECT_LT(r2.json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), turn1 - 5);
}

}  // namespace
}  // namespace ds4::servertest
