// ds4-server against hostile or careless clients (issue 22; docs/SERVER.md "Limits" and
// "Security"): every limit is tried on a real server over loopback, with raw sockets where
// curl would be too polite, each test bounded to a few seconds.
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <thread>

#include "common/error.h"
#include "server/host_policy.h"
#include "server_process.h"
#include "support/tool_run.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

json user_chat(const std::string& text, int max_tokens = 2) {
    return {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", max_tokens}, {"think", false}};
}

// A request head for a raw connection (no body framing unless `extra` adds it).
std::string head(const std::string& method, const std::string& path, const std::string& extra = {}) {
    return method + " " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\n" + extra + "\r\n";
}

std::string metric(const ServerProcess& s, const std::string& name) {
    std::smatch m;
    const std::string text = http("GET", s.url() + "/metrics").body;
    return std::regex_search(text, m, std::regex(name + " ([0-9]+)")) ? std::string(m[1]) : std::string();
}

// Waits up to timeout_s for the engine to be idle; returns whether it became idle.
bool engine_idle(const ServerProcess& s, double timeout_s) {
    const auto t0 = Clock::now();
    while (seconds_since(t0) < timeout_s) {
        if (metric(s, "ds4_active_requests") == "0" && metric(s, "ds4_queue_depth") == "0") return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
}

// Item 1: 100,000 levels of nesting killed the server (stack overflow); now a 400.
TEST(ServerLimits, DeeplyNestedJsonIs400AndTheServerLives) {
    ServerProcess s;
    const std::string deep = R"({"messages":[{"role":"user","content":"x"}],"a":)" + std::string(100000, '[') +
                             std::string(100000, ']') + "}";
    for (const char* path : {"/v1/chat/completions", "/v1/messages", "/v1/responses", "/v1/completions",
                             "/v1/messages/count_tokens"}) {
        const auto r = http("POST", s.url() + path, deep);
        EXPECT_EQ(r.status, 400) << path << " " << r.body.substr(0, 200);
        EXPECT_NE(r.body.find("nested deeper than 128 levels"), std::string::npos) << r.body.substr(0, 200);
    }
    EXPECT_EQ(http("GET", s.url() + "/health").status, 200);
}

// Item 3: slow clients cost a buffer, not a thread, and are cut at the header deadline; one
// client cannot hold more than its share of connections; /health is answered meanwhile.
TEST(ServerLimits, SlowClientsAreCutAndHealthIsNeverStarved) {
    ServerProcess s({"--max-client-connections", "4", "--header-timeout", "2", "--body-timeout", "1"});
    try {
        RawConnection probe(s.url(), "127.0.0.2");
    } catch (const Error& e) {
        GTEST_SKIP() << "no second loopback address: " << e.what();
    }
    const auto t0 = Clock::now();
    std::vector<std::unique_ptr<RawConnection>> slow;
    for (int i = 0; i < 6; ++i) {
        slow.push_back(std::make_unique<RawConnection>(s.url()));
        slow.back()->send("GET /health HTTP/1.1\r\n");
    }
    // Over this client's cap: 503 at once.
    for (int i = 4; i < 6; ++i) {
        const std::string r = slow[size_t(i)]->read_all(1.5);
        EXPECT_EQ(status_of(r), 503) << r;
        EXPECT_NE(r.find("too many open connections from 127.0.0.1 (the limit is 4"), std::string::npos) << r;
    }
    // The slow ones keep trickling header lines, well within any per-read timeout.
    std::atomic<bool> trickle{true};
    std::thread t([&] {
        while (trickle) {
            for (int i = 0; i < 4; ++i) slow[size_t(i)]->send("X-Slow: 1\r\n");
            std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
    });
    // Another client meanwhile: answered at once.
    {
        const auto t1 = Clock::now();
        RawConnection other(s.url(), "127.0.0.2");
        other.send(head("GET", "/health"));
        const std::string r = other.read_all(5);
        EXPECT_EQ(status_of(r), 200) << r;
        EXPECT_LT(seconds_since(t1), 2.0);
    }
    // The slow ones are cut at the 2 s header deadline although they never stop sending.
    for (int i = 0; i < 4; ++i) {
        const std::string r = slow[size_t(i)]->read_all(4);
        EXPECT_EQ(status_of(r), 408) << r;
        EXPECT_NE(r.find("request header not received within 2 s"), std::string::npos) << r;
    }
    trickle = false;
    t.join();
    EXPECT_LT(seconds_since(t0), 5.0);
    // Their slots are free again once they close (an answered connection counts until the
    // client closes it, 2 s at most).
    slow.clear();
    const auto t3 = Clock::now();
    int health = 0;
    while (seconds_since(t3) < 2 && (health = http("GET", s.url() + "/health").status) != 200)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    EXPECT_EQ(health, 200);

    // A body that stops coming: cut at the body deadline (1 s after the header).
    RawConnection body(s.url());
    const auto t2 = Clock::now();
    body.send(head("POST", "/v1/chat/completions", "Content-Type: application/json\r\nContent-Length: 100\r\n") +
              "{\"messages\":");
    const std::string r = body.read_all(4);
    EXPECT_EQ(status_of(r), 408) << r;
    EXPECT_NE(r.find("request body not received within 1 s"), std::string::npos) << r;
    EXPECT_LT(seconds_since(t2), 4.0);
}

TEST(ServerLimits, TotalConnectionCap) {
    ServerProcess s({"--max-connections", "2"});
    RawConnection a(s.url()), b(s.url());  // accepted in order: these two fill the cap
    RawConnection c(s.url(), "127.0.0.1");
    const std::string r = c.read_all(2);
    EXPECT_EQ(status_of(r), 503) << r;
    EXPECT_NE(r.find("too many open connections (the limit is 2, --max-connections)"), std::string::npos) << r;
}

// Item 6: --max-body was not applied to chunked bodies (300 MB read, 1.9 GB RSS), and the
// header had no limit (40,000 lines held 480 MB). Both are refused while reading.
TEST(ServerLimits, ChunkedBodiesAndHeadersAreBoundedWhileReading) {
    ServerProcess s({"--max-body", "100000"});
    const long rss_before = rss_kib(s.pid());
    RawConnection c(s.url());
    c.send(head("POST", "/v1/chat/completions", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n"));
    const std::string piece = std::string(65536, ' ');
    const std::string chunk = "10000\r\n" + piece + "\r\n";
    size_t sent = 0;
    std::string response;
    while (sent < (size_t(64) << 20)) {  // 64 MB offered, and never the last chunk
        if (!c.send(chunk)) break;
        sent += piece.size();
        if (c.readable()) {
            response = c.read_all(2);
            break;
        }
    }
    if (response.empty()) response = c.read_all(2);
    EXPECT_EQ(status_of(response), 413) << response.substr(0, 300);
    EXPECT_NE(response.find("request body too large (the limit is 100000 bytes, --max-body)"), std::string::npos);
    // The server stops reading soon after the limit (socket buffers take a few MB more).
    EXPECT_LT(sent, size_t(32) << 20) << "the server kept reading the body";
    EXPECT_LT(rss_kib(s.pid()) - rss_before, 32 * 1024);

    // A Content-Length over the limit: refused from the header, before any body byte.
    RawConnection cl(s.url());
    cl.send(head("POST", "/v1/chat/completions", "Content-Type: application/json\r\nContent-Length: 100001\r\n"));
    const std::string r1 = cl.read_all(2);
    EXPECT_EQ(status_of(r1), 413) << r1;

    // 40,000 header lines (about 1 MB), and never the blank line that ends a header: answered
    // 431 once the header passes 32 KiB.
    RawConnection lines(s.url());
    lines.send("GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    std::string r2;
    int sent_lines = 0;
    while (sent_lines < 40000 && r2.empty()) {
        std::string batch;
        for (int i = 0; i < 50; ++i) batch += "X-Header-" + std::to_string(sent_lines++) + ": value\r\n";
        if (!lines.send(batch)) break;
        if (lines.readable()) r2 = lines.read_all(2);
    }
    if (r2.empty()) r2 = lines.read_all(2);
    EXPECT_EQ(status_of(r2), 431) << r2.substr(0, 300);
    EXPECT_NE(r2.find("request header too large (the limit is 32768 bytes)"), std::string::npos) << r2;
    // (The header never ended: the server answered without waiting for it.)

    // More than 100 fields, though small: refused too.
    std::string many;
    for (int i = 0; i < 101; ++i) many += "X-" + std::to_string(i) + ": v\r\n";
    RawConnection fields(s.url());
    fields.send(head("GET", "/health", many));
    const std::string r3 = fields.read_all(2);
    EXPECT_EQ(status_of(r3), 431) << r3;
    EXPECT_NE(r3.find("too many header fields (102; the limit is 100)"), std::string::npos) << r3;

    // A chunked body within the limit is read as usual.
    const std::string body = user_chat("hi").dump();
    RawConnection ok(s.url());
    ok.send(head("POST", "/v1/chat/completions", "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n") +
            fmt::format("{:x}\r\n{}\r\n0\r\n\r\n", body.size(), body));
    const std::string r4 = ok.read_all(30);
    EXPECT_EQ(status_of(r4), 200) << r4.substr(0, 300);
    EXPECT_NE(r4.find("\"chat.completion\""), std::string::npos);
    EXPECT_EQ(http("GET", s.url() + "/health").status, 200);
}

// Item 20: a POST without Content-Length waited for the 10 s read timeout.
TEST(ServerLimits, BodyWithoutLengthIs411AtOnce) {
    ServerProcess s;
    for (const char* method : {"POST", "PUT", "PATCH"}) {
        RawConnection c(s.url());
        const auto t0 = Clock::now();
        c.send(head(method, "/v1/chat/completions", "Content-Type: application/json\r\n"));
        const std::string r = c.read_all(5);
        EXPECT_EQ(status_of(r), 411) << method << " " << r;
        EXPECT_NE(r.find("Content-Length required"), std::string::npos) << r;
        EXPECT_LT(seconds_since(t0), 3.0) << method;  // not the 10 s read timeout
    }
}

// Item 7: a JSON parse error echoed the whole bad input.
TEST(ServerLimits, ErrorsQuoteAFewHundredBytesOfTheRequest) {
    ServerProcess s;
    const std::string big(4 << 20, 'x');
    for (const std::string& body : {"{\"messages\": \"" + big, "{\"messages\": " + big + "}",
                                    R"({"messages":[{"role":")" + big + R"(","content":"x"}]})"}) {
        const auto r = http("POST", s.url() + "/v1/chat/completions", body);
        EXPECT_EQ(r.status, 400);
        EXPECT_LT(r.body.size(), 2000u) << r.body.substr(0, 300);
    }
    // The unterminated string is quoted in part, with its size.
    const auto r = http("POST", s.url() + "/v1/chat/completions", "{\"messages\": \"" + big);
    EXPECT_NE(r.body.find("bytes)"), std::string::npos) << r.body.substr(0, 300);
    const auto h = http("GET", s.url() + "/health", {}, {"Host: " + std::string(20000, 'h')});
    EXPECT_EQ(h.status, 403);
    EXPECT_LT(h.body.size(), 2000u);
}

// Item 9: a second server on the same port started (SO_REUSEPORT) and took half the traffic.
TEST(ServerSecurity, SecondServerOnTheSamePortFails) {
    ServerProcess first;
    try {
        ServerProcess second({"--port", std::to_string(first.port())});
        ADD_FAILURE() << "a second server listens on port " << first.port();
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("port in use"), std::string::npos) << e.what();
    }
    EXPECT_EQ(http("GET", first.url() + "/health").status, 200);
}

// Item 10: DNS rebinding (Host), cross-site requests (Origin, text/plain bodies).
TEST(ServerSecurity, HostOriginAndContentTypeChecks) {
    ServerProcess s({"--allowed-host", "Box.Example"});
    const std::string u = s.url();
    const std::string port = std::to_string(s.port());
    auto status = [&](const std::string& path, std::vector<std::string> headers) {
        return http("GET", u + path, {}, headers).status;
    };
    for (const std::string& host : std::vector<std::string>{"127.0.0.1", "127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "box.example:80"})
        EXPECT_EQ(status("/v1/models", {"Host: " + host}), 200) << host;
    for (const std::string& host : std::vector<std::string>{"evil.example", "evil.example:" + port, "127.0.0.2:" + port, "[::1]:" + port,
                                   "localhost.evil.example", "127.0.0.1@evil.example"})
        EXPECT_EQ(status("/v1/models", {"Host: " + host}), 403) << host;
    const auto rebound = http("GET", u + "/health", {}, {"Host: attacker.example"});
    EXPECT_EQ(rebound.status, 403);
    EXPECT_NE(rebound.json()["error"]["message"].get<std::string>().find("--allowed-host"), std::string::npos);
    const auto anthropic = http("POST", u + "/v1/messages", user_chat("x").dump(), {"Host: attacker.example"});
    EXPECT_EQ(anthropic.status, 403);
    EXPECT_EQ(anthropic.json()["error"]["type"], "permission_error");

    // A web page's Origin: refused unless it names this server; no CORS headers without --cors.
    const auto cross = http("POST", u + "/v1/chat/completions", user_chat("x").dump(), {"Origin: https://evil.example"});
    EXPECT_EQ(cross.status, 403);
    EXPECT_NE(cross.body.find("--cors"), std::string::npos);
    const auto same = http("GET", u + "/v1/models", {}, {"Origin: http://localhost:" + port});
    EXPECT_EQ(same.status, 200);
    EXPECT_EQ(same.header("Access-Control-Allow-Origin"), "");
    EXPECT_EQ(status("/v1/models", {"Origin: null"}), 403);

    // From a browser (it sends Origin), JSON bodies only: a form or text/plain POST needs no
    // preflight. Without an Origin any Content-Type is read as JSON (the fidelity test).
    for (const char* type : {"Content-Type: text/plain", "Content-Type: application/x-www-form-urlencoded",
                             "Content-Type:"}) {
        const auto r = http("POST", u + "/v1/chat/completions", user_chat("x").dump(),
                            {type, "Origin: http://localhost:" + port});
        EXPECT_EQ(r.status, 415) << type;
        EXPECT_NE(r.body.find("Content-Type must be application/json"), std::string::npos) << r.body;
    }
    EXPECT_EQ(http("POST", u + "/v1/chat/completions", user_chat("x").dump(),
                   {"Content-Type: Application/JSON; charset=utf-8", "Origin: http://localhost:" + port}).status, 200);

    // --cors: any Origin, with the headers.
    ServerProcess c({"--cors"});
    const auto cors = http("POST", c.url() + "/v1/chat/completions", user_chat("x").dump(), {"Origin: https://app.example"});
    EXPECT_EQ(cors.status, 200);
    EXPECT_EQ(cors.header("Access-Control-Allow-Origin"), "*");
    EXPECT_EQ(http("POST", c.url() + "/v1/chat/completions", user_chat("x").dump(),
                   {"Origin: https://app.example", "Content-Type: text/plain"}).status, 415);
    const auto pre = http("OPTIONS", c.url() + "/v1/chat/completions", {}, {"Origin: https://app.example"});
    EXPECT_EQ(pre.status, 204);
    EXPECT_NE(pre.header("Access-Control-Allow-Headers").find("Content-Type"), std::string::npos);
}

TEST(ServerSecurity, HostPolicyUnits) {
    using server::HostPolicy;
    const HostPolicy local{"127.0.0.1", {}};
    EXPECT_TRUE(server::host_allowed(local, "127.0.0.1:8000"));
    EXPECT_TRUE(server::host_allowed(local, "localhost."));
    EXPECT_FALSE(server::host_allowed(local, "10.0.0.1"));
    EXPECT_FALSE(server::host_allowed(local, ""));
    EXPECT_FALSE(server::host_allowed(local, "a:b:c"));
    const HostPolicy any{"0.0.0.0", {"gpu-box"}};
    EXPECT_TRUE(server::host_allowed(any, "10.0.0.1:8000"));  // an IP literal cannot be rebound
    EXPECT_TRUE(server::host_allowed(any, "GPU-BOX:8000"));
    EXPECT_FALSE(server::host_allowed(any, "gpu-box.evil.example"));
    const HostPolicy v6{"::1", {}};
    EXPECT_TRUE(server::host_allowed(v6, "[::1]:8000"));
    EXPECT_FALSE(server::host_allowed(v6, "[::2]"));
    EXPECT_TRUE(server::origin_allowed(local, "http://127.0.0.1:3000"));
    EXPECT_FALSE(server::origin_allowed(local, "file://"));
    for (const char* h : {"localhost", "127.0.0.1", "127.1.2.3", "::1", "[::1]"}) EXPECT_TRUE(server::is_loopback_host(h)) << h;
    for (const char* h : {"0.0.0.0", "::", "192.168.1.2", "example.com"}) EXPECT_FALSE(server::is_loopback_host(h)) << h;
}

// Item 12: a non-loopback --host without --api-key is said on stderr (before binding, so a
// test can see it on an address that cannot be bound: TEST-NET-1).
TEST(ServerSecurity, NonLoopbackHostWithoutApiKeyWarns) {
    const std::string bin = test::binary("ds4-server");
    const auto open = test::run_command({"timeout", "60", bin, "-m", tiny_model(), "-t", "1", "--host", "192.0.2.1",
                                           "--port", "0"});
    EXPECT_NE(open.exit_code, 0);
    EXPECT_NE(open.output.find("WARNING: listening on 192.0.2.1, which is not a loopback address, without --api-key"),
              std::string::npos) << open.output;
    EXPECT_NE(open.output.find("cannot listen on 192.0.2.1:0: not an address of this machine"), std::string::npos)
        << open.output;
    const auto keyed = test::run_command({"timeout", "60", bin, "-m", tiny_model(), "-t", "1", "--host", "192.0.2.1",
                                            "--port", "0", "--api-key", "k"});
    EXPECT_EQ(keyed.output.find("WARNING"), std::string::npos) << keyed.output;
    ServerProcess loopback;
    EXPECT_EQ(loopback.log().find("WARNING"), std::string::npos) << loopback.log();
}

TEST(ServerFlags, TimeoutsAreFiniteSecondsInRange) {
    const std::string bin = test::binary("ds4-server");
    for (const char* flag : {"--header-timeout", "--body-timeout", "--request-timeout"})
        for (const char* value : {"nan", "inf", "-1", "1e400", "5x", ""}) {
            const auto r = test::run_command({"timeout", "60", bin, "-m", "/nonexistent", flag, value});
            EXPECT_NE(r.exit_code, 0) << flag << " " << value;
            EXPECT_NE(r.output.find("is not a number of seconds from"), std::string::npos) << flag << " " << value
                                                                                           << ": " << r.output;
        }
    const auto ok = test::run_command({"timeout", "60", bin, "-m", "/nonexistent", "--request-timeout", "0.5"});
    EXPECT_NE(ok.output.find("/nonexistent"), std::string::npos) << ok.output;  // got past the flags
}

// Item 19 over HTTP: unknown model 404 in each API's shape, aliases and listed ids served.
TEST(ServerErrorsMore, UnknownModelAndBadToolSchema) {
    ServerProcess s;
    const std::string u = s.url();
    json chat = user_chat("x");
    chat["model"] = "gpt-4o";
    const auto o = post(u + "/v1/chat/completions", chat);
    EXPECT_EQ(o.status, 404);
    EXPECT_EQ(o.json()["error"]["code"], "model_not_found");
    EXPECT_EQ(o.json()["error"]["param"], "model");
    const auto a = post(u + "/v1/messages", chat);
    EXPECT_EQ(a.status, 404);
    EXPECT_EQ(a.json()["error"]["type"], "not_found_error");
    for (const char* id : {"deepseek-v4-flash", "deepseek-v4-pro", "deepseek-chat", "deepseek-reasoner"}) {
        chat["model"] = id;
        EXPECT_EQ(post(u + "/v1/chat/completions", chat).status, 200) << id;
        EXPECT_EQ(http("GET", u + "/v1/models/" + id).status, 200) << id;
    }
    json tools = user_chat("x");
    tools["tools"] = {{{"type", "function"}, {"function", {{"name", "f"}, {"parameters", 5}}}}};
    const auto t = post(u + "/v1/chat/completions", tools);
    EXPECT_EQ(t.status, 400);
    EXPECT_EQ(t.json()["error"]["param"], "tools");
}

const std::string kDsml = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";
const std::string kUnterminated = "<think>x</think>\n\n<" + kDsml + "tool_calls>\n<" + kDsml + "invoke name=\"f\">";

json anthropic(bool stream, int max_tokens, bool tools = false) {
    json j = {{"model", "deepseek-v4-flash"}, {"max_tokens", max_tokens}, {"stream", stream},
              {"messages", {{{"role", "user"}, {"content", "go"}}}}};
    if (tools) j["tools"] = {{{"name", "f"}, {"input_schema", {{"type", "object"}}}}};
    return j;
}

void expect_error_event(const HttpResult& r, const std::string& message) {
    EXPECT_EQ(r.status, 200);
    const auto ev = parse_sse(r.body);
    ASSERT_FALSE(ev.empty()) << r.body;
    EXPECT_EQ(ev.back().event, "error") << r.body.substr(r.body.size() > 600 ? r.body.size() - 600 : 0);
    const json d = json::parse(ev.back().data);
    EXPECT_EQ(d["type"], "error");
    EXPECT_EQ(d["error"]["type"], "api_error");
    EXPECT_NE(d["error"]["message"].get<std::string>().find(message), std::string::npos) << ev.back().data;
    EXPECT_EQ(r.body.find("message_stop"), std::string::npos);
    EXPECT_EQ(r.body.find("end_turn"), std::string::npos);
}

// Item 13: the Anthropic route reported an unterminated tool call and a shutdown as end_turn.
TEST(ServerAnthropicErrors, UnterminatedToolCallIsAnError) {
    ServerProcess s({}, json::array({kUnterminated, kUnterminated}));
    expect_error_event(post(s.url() + "/v1/messages", anthropic(true, 200, true)), "unterminated tool call");
    const auto r = post(s.url() + "/v1/messages", anthropic(false, 200, true));
    EXPECT_EQ(r.status, 500) << r.body;
    EXPECT_EQ(r.json()["type"], "error");
    EXPECT_EQ(r.json()["error"]["message"], "unterminated tool call");
}

// Starts `requests` long generations, waits until one is on the engine, stops the server with
// `sig`, and returns what each client got.
std::vector<HttpResult> stop_during(ServerProcess& s, const std::string& path, const std::vector<json>& requests,
                                    int sig) {
    std::vector<HttpResult> out(requests.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < requests.size(); ++i)
        clients.emplace_back([&, i] { out[i] = post(s.url() + path, requests[i]); });
    const auto t0 = Clock::now();
    while (seconds_since(t0) < 10 && metric(s, "ds4_active_requests") != "1")
        std::this_thread::sleep_for(std::chrono::milliseconds(25));
    std::this_thread::sleep_for(std::chrono::milliseconds(300));  // tokens are flowing
    EXPECT_EQ(s.terminate(20, sig), 0) << s.log();
    for (auto& t : clients) t.join();
    return out;
}

TEST(ServerAnthropicErrors, ShutdownIsAnErrorEventOrA503) {
    {
        ServerProcess s;
        const auto r = stop_during(s, "/v1/messages", {anthropic(true, 100000)}, SIGTERM);
        expect_error_event(r[0], "shutdown requested");
    }
    {
        ServerProcess s;
        const auto r = stop_during(s, "/v1/messages", {anthropic(false, 100000)}, SIGTERM);
        EXPECT_EQ(r[0].status, 503) << r[0].body;
        EXPECT_EQ(r[0].json()["type"], "error");
        EXPECT_NE(r[0].json()["error"]["message"].get<std::string>().find("shutdown requested"), std::string::npos);
    }
}

// Item 14: SIGHUP killed the server at once; it is now a graceful stop like SIGTERM.
TEST(ServerShutdown, SighupIsGracefulLikeSigterm) {
    ServerProcess s;
    json req = user_chat("go on forever", 100000);
    req["stream"] = true;
    const auto r = stop_during(s, "/v1/chat/completions", {req}, SIGHUP);
    EXPECT_EQ(r[0].status, 200);
    EXPECT_NE(r[0].body.find("\"finish_reason\":\"error\""), std::string::npos) << r[0].body.substr(0, 300);
    EXPECT_NE(r[0].body.find("data: [DONE]"), std::string::npos);
    EXPECT_NE(s.log().find("signal 1: shutting down"), std::string::npos) << s.log();
    EXPECT_NE(s.log().find("ds4-server: stopped"), std::string::npos) << s.log();
}

// Item 21: a non-streaming request whose client left kept generating to the end of the
// context; and --request-timeout bounds a request's wall-clock time.
TEST(ServerLimits, ClientGoneCancelsNonStreamingRequests) {
    ServerProcess s;
    const auto t0 = Clock::now();
    const auto r = http("POST", s.url() + "/v1/chat/completions", user_chat("go on forever", 100000).dump(), {}, 2.0);
    EXPECT_EQ(r.status, 0);  // curl gave up after 2 s
    EXPECT_TRUE(engine_idle(s, 5)) << "the job is still running\n" << s.log();
    EXPECT_LT(seconds_since(t0), 8.0);
    const std::string generated = metric(s, "ds4_generated_tokens_total");
    ASSERT_FALSE(generated.empty());
    EXPECT_LT(std::stoi(generated), 5000) << s.log();
    EXPECT_NE(s.log().find("client gone"), std::string::npos) << s.log();
}

TEST(ServerLimits, RequestTimeoutEndsLongRequests) {
    ServerProcess s({"--request-timeout", "1"});
    // The random model samples end-of-sentence now and then (temperature 1, a random seed per
    // request): a reply that ended by itself says nothing about the timeout, so such a reply
    // is asked again (each try ends by itself with a small probability).
    auto t0 = Clock::now();
    auto plain = post(s.url() + "/v1/chat/completions", user_chat("go on forever", 100000));
    for (int i = 0; i < 3 && plain.status == 200 && plain.json()["choices"][0]["finish_reason"] == "stop"; ++i) {
        t0 = Clock::now();
        plain = post(s.url() + "/v1/chat/completions", user_chat("go on forever", 100000));
    }
    EXPECT_LT(seconds_since(t0), 6.0);
    ASSERT_EQ(plain.status, 200) << plain.body;
    EXPECT_EQ(plain.json()["choices"][0]["finish_reason"], "error");
    json streamed = user_chat("go on forever", 100000);
    streamed["stream"] = true;
    t0 = Clock::now();
    auto st = post(s.url() + "/v1/chat/completions", streamed);
    for (int i = 0; i < 3 && st.body.find("\"finish_reason\":\"stop\"") != std::string::npos; ++i) {
        t0 = Clock::now();
        st = post(s.url() + "/v1/chat/completions", streamed);
    }
    EXPECT_LT(seconds_since(t0), 6.0);
    EXPECT_NE(st.body.find("\"finish_reason\":\"error\""), std::string::npos);
    EXPECT_NE(st.body.find("data: [DONE]"), std::string::npos);
    const auto an = post(s.url() + "/v1/messages", anthropic(false, 100000));
    EXPECT_EQ(an.status, 504) << an.body;
    EXPECT_NE(an.json()["error"]["message"].get<std::string>().find("request timeout"), std::string::npos);
    EXPECT_NE(s.log().find("request timeout (--request-timeout)"), std::string::npos) << s.log();
    // Short requests are unaffected.
    EXPECT_EQ(post(s.url() + "/v1/chat/completions", user_chat("hi")).json()["choices"][0]["finish_reason"], "length");
}

}  // namespace
}  // namespace ds4::servertest
