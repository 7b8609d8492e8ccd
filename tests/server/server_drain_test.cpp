// Load-balancer signals (issue 37 item 2; docs/SERVER.md "Health, drain and session
// affinity"): /health and /ready answer 503 while a new request would be refused (queue full)
// and while draining; SIGTERM with --drain-timeout lets accepted requests finish, refuses new
// ones with 503 "draining", shows ds4_draining 1, saves the disk KV cache and exits 0; past the
// deadline what is left ends with an error; the session named by X-DS4-Session or the body's
// user / metadata.user_id fields is echoed, logged and counted.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <thread>

#include "server_process.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

json chat(const std::string& text, int max_tokens, bool stream) {
    return {{"messages", {{{"role", "user"}, {"content", text}}}}, {"thinking", {{"type", "disabled"}}},
            {"temperature", 0}, {"max_tokens", max_tokens}, {"stream", stream}};
}

double metric(const std::string& m, const std::string& name) {
    std::smatch g;
    if (!std::regex_search(m, g, std::regex("\n" + name + " ([0-9.e+-]+)"))) return -1;
    return std::stod(g[1]);
}

// Sends `body` as a raw streaming request and waits until the stream has begun.
bool start_stream(RawConnection& c, const json& req) {
    const std::string body = req.dump();
    return c.send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body) &&
           c.readable(60);
}

TEST(ServerDrain, HealthIsA503WhileTheQueueIsFull) {
    ServerProcess s({"--parallel", "1", "--max-queue", "0", "--ctx", "4096"});
    EXPECT_EQ(http("GET", s.url() + "/health").status, 200);
    EXPECT_EQ(http("GET", s.url() + "/ready").status, 200);
    {
        RawConnection hold(s.url());
        ASSERT_TRUE(start_stream(hold, chat("Go on for a long time.", 4000, true)));
        for (const char* path : {"/health", "/ready"}) {
            const HttpResult h = http("GET", s.url() + path);
            EXPECT_EQ(h.status, 503) << path << h.body;
            EXPECT_EQ(h.json()["status"], "busy") << h.body;
            EXPECT_EQ(h.json()["slots"]["busy"], 1);
            EXPECT_NE(h.header("retry-after"), "");
        }
    }  // the client leaves: its slot is freed
    int status = 0;
    for (int i = 0; i < 200 && (status = http("GET", s.url() + "/health").status) != 200; ++i)
        std::this_thread::sleep_for(25ms);
    EXPECT_EQ(status, 200);
}

TEST(ServerDrain, SigtermLetsAcceptedRequestsFinishAndSaves) {
    const std::string dir = std::string(DS4_SERVER_TEST_DIR) + "/kv-drain-" + std::to_string(getpid());
    std::filesystem::remove_all(dir);
    ServerProcess s({"--ctx", "4096", "--drain-timeout", "60", "--kv-disk-dir", dir, "--kv-cache-min-tokens", "8"});
    HttpResult streamed;
    std::thread client([&] { streamed = post(s.url() + "/v1/chat/completions", chat("Tell me a long story.", 300, true)); });
    for (int i = 0; i < 400; ++i) {
        if (metric(http("GET", s.url() + "/metrics").body, "ds4_active_requests") == 1) break;
        std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(kill(s.pid(), SIGTERM), 0);
    std::string m;
    for (int i = 0; i < 400 && metric(m = http("GET", s.url() + "/metrics").body, "ds4_draining") != 1; ++i)
        std::this_thread::sleep_for(5ms);
    EXPECT_EQ(metric(m, "ds4_draining"), 1) << m;
    const HttpResult h = http("GET", s.url() + "/health");
    EXPECT_EQ(h.status, 503);
    EXPECT_EQ(h.json()["status"], "draining") << h.body;
    const HttpResult refused = post(s.url() + "/v1/chat/completions", chat("me too", 4, false));
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_EQ(refused.json()["error"]["code"], "draining") << refused.body;
    EXPECT_NE(refused.header("retry-after"), "");
    client.join();
    EXPECT_EQ(streamed.status, 200);
    EXPECT_TRUE(contains(streamed.body, "\"finish_reason\":\"length\"")) << streamed.body.substr(0, 300);
    EXPECT_FALSE(contains(streamed.body, "shutdown requested"));
    EXPECT_EQ(s.terminate(60, 0), 0) << s.log();  // waits; no second signal
    EXPECT_TRUE(contains(s.log(), "ds4-server: draining: 1 request in flight")) << s.log();
    EXPECT_TRUE(contains(s.log(), "every request finished")) << s.log();
    bool saved = false;
    for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) saved = saved || e.path().extension() == ".kv";
    EXPECT_TRUE(saved) << "no checkpoint in " << dir;
    std::filesystem::remove_all(dir);
}

TEST(ServerDrain, TheDeadlineEndsWhatIsLeft) {
    ServerProcess s({"--ctx", "4096", "--drain-timeout", "1"});
    HttpResult streamed;
    std::thread client([&] { streamed = post(s.url() + "/v1/chat/completions", chat("go on forever", 100000, true)); });
    for (int i = 0; i < 400; ++i) {
        if (metric(http("GET", s.url() + "/metrics").body, "ds4_active_requests") == 1) break;
        std::this_thread::sleep_for(10ms);
    }
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(s.terminate(30), 0) << s.log();
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    client.join();
    EXPECT_GE(took, 0.9);
    EXPECT_LT(took, 15);
    EXPECT_TRUE(contains(streamed.body, "\"finish_reason\":\"error\"")) << streamed.body.substr(0, 300);
    EXPECT_TRUE(contains(s.log(), "still in flight; they end now")) << s.log();
}

TEST(ServerSession, TheAffinityKeyIsEchoedLoggedAndCounted) {
    ServerProcess s({"--ctx", "2048"});
    const HttpResult a = post(s.url() + "/v1/chat/completions", chat("hi", 2, false), {"X-DS4-Session: team-7/alice"});
    ASSERT_EQ(a.status, 200) << a.body;
    EXPECT_EQ(a.header("x-ds4-session"), "team-7/alice");
    json u = chat("hi", 2, true);
    u["user"] = "bob@example.com";
    const HttpResult b = post(s.url() + "/v1/chat/completions", u);
    EXPECT_EQ(b.header("x-ds4-session"), "bob@example.com");
    const HttpResult c = post(s.url() + "/v1/messages",
                              json{{"max_tokens", 2},
                                   {"metadata", {{"user_id", "carol \"x\"\n"}}},
                                   {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
    ASSERT_EQ(c.status, 200) << c.body;
    EXPECT_EQ(c.header("x-ds4-session"), "carol__x__");
    const HttpResult none = post(s.url() + "/v1/chat/completions", chat("hi", 2, false));
    EXPECT_EQ(none.header("x-ds4-session"), "");
    EXPECT_EQ(metric(http("GET", s.url() + "/metrics").body, "ds4_session_requests_total"), 3);
    s.terminate();
    const std::string log = s.log();
    for (const char* k : {"session=team-7/alice", "session=bob@example.com", "session=carol__x__"})
        EXPECT_TRUE(contains(log, k)) << k << "\n" << log;
}

}  // namespace
}  // namespace ds4::servertest
