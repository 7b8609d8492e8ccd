// ds4-server with several slots (--parallel): concurrent requests equal the same requests one at
// a time, batching really happens, slot choice keeps live conversations, the queue is bounded.
#include <gtest/gtest.h>

#include <regex>
#include <thread>

#include "server_process.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;

const std::string kSystem =
    "You are a terse assistant for a team of engineers. Answer in one short sentence, and never "
    "use lists. The team works on an inference engine.";

// A deterministic request (no thinking, greedy) with a shared system prompt.
json greedy_chat(const std::string& user, int max_tokens, bool stream) {
    return {{"messages", {{{"role", "system"}, {"content", kSystem}}, {{"role", "user"}, {"content", user}}}},
            {"thinking", {{"type", "disabled"}}},
            {"temperature", 0},
            {"max_tokens", max_tokens},
            {"stream", stream}};
}

// The generated text of a chat answer, streamed or not.
std::string text_of(const HttpResult& r, bool stream) {
    if (!stream) return r.json()["choices"][0]["message"]["content"].get<std::string>();
    std::string text;
    for (const auto& e : parse_sse(r.body)) {
        if (e.event == "comment" || e.data == "[DONE]") continue;
        const json j = json::parse(e.data);
        if (j.contains("choices") && !j["choices"].empty() && j["choices"][0]["delta"].contains("content") &&
            j["choices"][0]["delta"]["content"].is_string())
            text += j["choices"][0]["delta"]["content"].get<std::string>();
    }
    return text;
}

uint64_t metric(const std::string& metrics, const std::string& name) {
    std::smatch m;
    if (!std::regex_search(metrics, m, std::regex("\n" + name + " ([0-9.]+)"))) return UINT64_MAX;
    return uint64_t(std::stod(m[1]));
}

TEST(ServerParallel, ConcurrentRequestsEqualTheSameRequestsOneAtATime) {
    ServerProcess s({"--parallel", "4", "--ctx", "2048", "--mixed-prefill-quantum", "16"});
    const std::string u = s.url() + "/v1/chat/completions";
    constexpr int kRequests = 6;  // more than the slots: two wait in the queue
    std::vector<json> reqs;
    for (int i = 0; i < kRequests; ++i)
        reqs.push_back(greedy_chat("Question number " + std::to_string(i) + std::string(size_t(i) * 7, '!'),
                                   24 + 4 * i, i % 2 == 0));
    std::vector<std::string> alone(kRequests), together(kRequests);
    for (int i = 0; i < kRequests; ++i) {
        const HttpResult r = post(u, reqs[size_t(i)]);
        ASSERT_EQ(r.status, 200) << r.body;
        alone[size_t(i)] = text_of(r, i % 2 == 0);
        ASSERT_FALSE(alone[size_t(i)].empty()) << i;
    }
    const std::string m0 = http("GET", s.url() + "/metrics").body;
    std::vector<std::thread> clients;
    std::vector<HttpResult> results(kRequests);
    for (int i = 0; i < kRequests; ++i)
        clients.emplace_back([&, i] { results[size_t(i)] = post(u, reqs[size_t(i)]); });
    for (auto& t : clients) t.join();
    for (int i = 0; i < kRequests; ++i) {
        ASSERT_EQ(results[size_t(i)].status, 200) << results[size_t(i)].body;
        EXPECT_EQ(text_of(results[size_t(i)], i % 2 == 0), alone[size_t(i)]) << "request " << i;
    }
    // The concurrent phase ran several sequences per evaluation.
    const std::string m1 = http("GET", s.url() + "/metrics").body;
    const uint64_t steps = metric(m1, "ds4_batch_steps_total") - metric(m0, "ds4_batch_steps_total");
    const uint64_t seqs = metric(m1, "ds4_batch_sequences_total") - metric(m0, "ds4_batch_sequences_total");
    EXPECT_GT(double(seqs) / double(steps), 1.5) << m1;
    EXPECT_EQ(metric(m1, "ds4_slots"), 4u);
    EXPECT_EQ(metric(m1, "ds4_slots_busy"), 0u);
    const json health = http("GET", s.url() + "/health").json();
    EXPECT_EQ(health["slots"]["total"], 4);
    EXPECT_EQ(health["slots"]["busy"], 0);
}

// The scheduler's cost model (no --mixed-prefill-quantum; docs/SERVER.md, "Scheduler cost
// model") cuts prompts by the measured step costs: with a tight stall bound the prompts joining
// generating slots go in small pieces, and every request still gets what it gets alone.
TEST(ServerParallel, TheCostModelKeepsConcurrentRequestsEqualToAlone) {
    ServerProcess s({"--parallel", "3", "--ctx", "2048", "--max-decode-stall", "1.5"});
    const std::string u = s.url() + "/v1/chat/completions";
    constexpr int kRequests = 4;
    std::vector<json> reqs;
    for (int i = 0; i < kRequests; ++i)
        reqs.push_back(greedy_chat("Cost model question " + std::to_string(i) + std::string(size_t(i) * 23, '?'),
                                   12 + 4 * i, i % 2 == 1));
    std::vector<std::string> alone(kRequests);
    for (int i = 0; i < kRequests; ++i) {
        const HttpResult r = post(u, reqs[size_t(i)]);
        ASSERT_EQ(r.status, 200) << r.body;
        alone[size_t(i)] = text_of(r, i % 2 == 1);
        ASSERT_FALSE(alone[size_t(i)].empty()) << i;
    }
    const std::string m0 = http("GET", s.url() + "/metrics").body;
    std::vector<std::thread> clients;
    std::vector<HttpResult> results(kRequests);
    for (int i = 0; i < kRequests; ++i)
        clients.emplace_back([&, i] { results[size_t(i)] = post(u, reqs[size_t(i)]); });
    for (auto& t : clients) t.join();
    for (int i = 0; i < kRequests; ++i) {
        ASSERT_EQ(results[size_t(i)].status, 200) << results[size_t(i)].body;
        EXPECT_EQ(text_of(results[size_t(i)], i % 2 == 1), alone[size_t(i)]) << "request " << i;
    }
    const std::string m1 = http("GET", s.url() + "/metrics").body;
    const uint64_t steps = metric(m1, "ds4_batch_steps_total") - metric(m0, "ds4_batch_steps_total");
    const uint64_t seqs = metric(m1, "ds4_batch_sequences_total") - metric(m0, "ds4_batch_sequences_total");
    EXPECT_GT(double(seqs) / double(steps), 1.5) << m1;
}

TEST(ServerParallel, AnEmptySlotIsPreferredOverAConversationSharingOnlyTheSystemPrompt) {
    ServerProcess s({"--parallel", "2", "--ctx", "2048"});
    const std::string u = s.url() + "/v1/chat/completions";
    json a = greedy_chat("Tell me about slot A.", 12, false);
    const HttpResult ra = post(u, a);
    ASSERT_EQ(ra.status, 200) << ra.body;
    const int pa = ra.json()["usage"]["prompt_tokens"];
    // B shares only the system prompt with A: it must take the empty slot, not A's.
    const HttpResult rb = post(u, greedy_chat("And now slot B, please.", 12, false));
    ASSERT_EQ(rb.status, 200) << rb.body;
    EXPECT_EQ(rb.json()["usage"]["prompt_tokens_details"]["cached_tokens"], 0);
    // A's follow-up finds A's conversation still live: all of A's prompt is reused.
    a["messages"].push_back({{"role", "assistant"}, {"content", ra.json()["choices"][0]["message"]["content"]}});
    a["messages"].push_back({{"role", "user"}, {"content", "More about A."}});
    const HttpResult ra2 = post(u, a);
    ASSERT_EQ(ra2.status, 200) << ra2.body;
    EXPECT_GE(ra2.json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), pa);
    // A third conversation with both slots holding one: the least recently used (B's) goes,
    // sharing the system prompt.
    const HttpResult rc = post(u, greedy_chat("A third one, C.", 4, false));
    ASSERT_EQ(rc.status, 200) << rc.body;
    EXPECT_GT(rc.json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(), 10);
    a["messages"].push_back({{"role", "assistant"}, {"content", ra2.json()["choices"][0]["message"]["content"]}});
    a["messages"].push_back({{"role", "user"}, {"content", "Last about A."}});
    const HttpResult ra3 = post(u, a);
    ASSERT_EQ(ra3.status, 200) << ra3.body;
    EXPECT_GE(ra3.json()["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>(),
              ra2.json()["usage"]["prompt_tokens"].get<int>());
}

TEST(ServerParallel, AFullQueueIsA503WithRetryAfterInEachApisShape) {
    ServerProcess s({"--parallel", "1", "--max-queue", "0", "--ctx", "4096"});
    // A long stream holds the only slot.
    RawConnection hold(s.url());
    json req = greedy_chat("Go on for a long time.", 4000, true);
    const std::string body = req.dump();
    ASSERT_TRUE(hold.send("POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                          "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
    ASSERT_TRUE(hold.readable(30));  // the stream started: the slot is busy
    const HttpResult oa = post(s.url() + "/v1/chat/completions", greedy_chat("me too", 4, false));
    EXPECT_EQ(oa.status, 503) << oa.body;
    EXPECT_EQ(oa.header("retry-after"), "5");
    EXPECT_EQ(oa.json()["error"]["code"], "queue_full") << oa.body;
    const HttpResult an = post(s.url() + "/v1/messages",
                               {{"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
    EXPECT_EQ(an.status, 503) << an.body;
    EXPECT_EQ(an.json()["type"], "error");
    EXPECT_NE(an.header("retry-after"), "");
    const std::string m = http("GET", s.url() + "/metrics").body;
    EXPECT_EQ(metric(m, "ds4_queue_rejected_total"), 2u) << m;
    const json health = http("GET", s.url() + "/health").json();
    EXPECT_EQ(health["slots"]["busy"], 1);
}

}  // namespace
}  // namespace ds4::servertest
