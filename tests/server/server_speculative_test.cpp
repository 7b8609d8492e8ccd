// ds4-server with speculative decoding (--mtp, docs/SPECULATIVE.md): a drafter per slot, drafts
// verified inside the batched step. Greedy answers in every API shape, one at a time and
// concurrently over several slots, are the answers of the same server without --mtp.
#include <gtest/gtest.h>

#include <thread>

#include "server_process.h"
#include "support/tiny_model.h"
#include "support/tool_run.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;

class ServerSpeculative : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = dir_->file("model.gguf");
        support_ = dir_->file("mtp.gguf");
        auto args = test::kTinyQ8Io;
        args.insert(args.end(), {"--mtp-out", support_});
        const auto r = test::write_tiny_model(model_, args);
        ASSERT_EQ(r.exit_code, 0) << r.output;
    }
    static void TearDownTestSuite() { delete dir_; }

    static json chat(const std::string& user, int max_tokens, bool stream) {
        return {{"messages", {{{"role", "user"}, {"content", user}}}},
                {"thinking", {{"type", "disabled"}}},
                {"temperature", 0},
                {"max_tokens", max_tokens},
                {"stream", stream}};
    }

    static test::TempDir* dir_;
    static std::string model_, support_;
};
test::TempDir* ServerSpeculative::dir_ = nullptr;
std::string ServerSpeculative::model_, ServerSpeculative::support_;

TEST_F(ServerSpeculative, GreedyAnswersEqualThoseWithoutDraftsInEveryApiAndSlot) {
    ServerProcess plain({"-m", model_, "--ctx", "1024", "--parallel", "2"}, nullptr, ServerProcess::Pipeline::off);
    ServerProcess spec({"-m", model_, "--ctx", "1024", "--parallel", "2", "--mtp", support_, "--mtp-draft", "4",
                        "--mtp-margin", "0"},
                       nullptr, ServerProcess::Pipeline::off);
    EXPECT_NE(spec.log().find("speculative decoding: MTP head"), std::string::npos) << spec.log();
    struct Req {
        std::string path;
        json body;
    };
    std::vector<Req> reqs;
    for (int i = 0; i < 4; ++i) reqs.push_back({"/v1/chat/completions", chat("Question " + std::to_string(i), 20 + 3 * i, false)});
    reqs.push_back({"/v1/completions",
                    {{"prompt", "Once upon a time"}, {"temperature", 0}, {"max_tokens", 24}, {"thinking", {{"type", "disabled"}}}}});
    reqs.push_back({"/v1/messages",
                    {{"model", "deepseek-v4-flash"}, {"messages", {{{"role", "user"}, {"content", "Hello there"}}}},
                     {"temperature", 0}, {"max_tokens", 24}, {"thinking", {{"type", "disabled"}}}}});
    // What must agree: the answer (ids, times and cache counts differ between servers).
    auto answer = [](const HttpResult& r) {
        json j = json::parse(r.body);
        for (const char* k : {"id", "created", "system_fingerprint", "usage", "timings"}) j.erase(k);
        return j.dump();
    };
    std::vector<std::string> want;
    for (const Req& r : reqs) {
        const HttpResult a = post(plain.url() + r.path, r.body);
        ASSERT_EQ(a.status, 200) << a.body;
        want.push_back(answer(a));
    }
    for (size_t i = 0; i < reqs.size(); ++i) {
        const HttpResult b = post(spec.url() + reqs[i].path, reqs[i].body);
        ASSERT_EQ(b.status, 200) << b.body;
        EXPECT_EQ(answer(b), want[i]) << reqs[i].path;
    }
    // Concurrently: two slots drafting inside one batched step.
    std::vector<HttpResult> got(reqs.size());
    std::vector<std::thread> clients;
    for (size_t i = 0; i < reqs.size(); ++i)
        clients.emplace_back([&, i] { got[i] = post(spec.url() + reqs[i].path, reqs[i].body); });
    for (auto& t : clients) t.join();
    for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_EQ(got[i].status, 200) << got[i].body;
        EXPECT_EQ(answer(got[i]), want[i]) << reqs[i].path;
    }
    // The drafts were verified (the metrics count them), and some of these were rejected.
    const std::string m = http("GET", spec.url() + "/metrics").body;
    const std::string key = "\nds4_draft_tokens_total ";
    const size_t at = m.find(key);
    ASSERT_NE(at, std::string::npos) << m;
    EXPECT_GT(std::stoll(m.substr(at + key.size())), 0) << m;
    // Streamed: the same text in the deltas.
    auto streamed = [](const HttpResult& r) {
        std::string text;
        for (const auto& e : parse_sse(r.body)) {
            if (e.event == "comment" || e.data == "[DONE]") continue;
            const json j = json::parse(e.data);
            if (j.contains("choices") && !j["choices"].empty() && j["choices"][0]["delta"].contains("content") &&
                j["choices"][0]["delta"]["content"].is_string())
                text += j["choices"][0]["delta"]["content"].get<std::string>();
        }
        return text;
    };
    const json s0 = chat("Question 0", 20, true);
    EXPECT_EQ(streamed(post(spec.url() + "/v1/chat/completions", s0)), streamed(post(plain.url() + "/v1/chat/completions", s0)));
}

// Continued checkpoints while drafting: as many as plain decoding makes (a multi-row step does
// not skip a multiple of the interval). That they are taken after verification (never with
// rejected rows in them) is by construction (Scheduler::after_eval), not seen from here.
TEST_F(ServerSpeculative, ContinuedCheckpointsAreThoseOfPlainDecoding) {
    const json first = chat("Tell me a long story about the sea.", 60, false);
    auto stores = [&](const std::string& name, std::vector<std::string> extra) {
        std::vector<std::string> a = {"-m", model_, "--ctx", "1024", "--kv-disk-dir", dir_->file(name),
                                      "--kv-cache-min-tokens", "16", "--kv-cache-continued-interval-tokens", "16",
                                      "--kv-cache-boundary-align-tokens", "16", "--kv-cache-boundary-trim-tokens", "4"};
        a.insert(a.end(), extra.begin(), extra.end());
        ServerProcess s(a, nullptr, ServerProcess::Pipeline::off);
        const HttpResult r = post(s.url() + "/v1/chat/completions", first);
        EXPECT_EQ(r.status, 200) << r.body;
        const std::string m = http("GET", s.url() + "/metrics").body;
        const std::string key = "\nds4_kv_disk_stores_total ";
        const size_t at = m.find(key);
        EXPECT_NE(at, std::string::npos) << m;
        return at == std::string::npos ? -1LL : std::stoll(m.substr(at + key.size()));
    };
    const long long plain = stores("kv-plain", {});
    const long long drafted = stores("kv-spec", {"--mtp", support_, "--mtp-draft", "3", "--mtp-margin", "0"});
    EXPECT_GE(plain, 3);  // 60 tokens cross the interval of 16 several times
    EXPECT_EQ(drafted, plain);
}

TEST_F(ServerSpeculative, AFileWithoutAHeadIsRefusedAtStartup) {
    EXPECT_THROW(ServerProcess({"-m", model_, "--ctx", "1024", "--mtp", model_}, nullptr, ServerProcess::Pipeline::off),
                 std::exception);
}

}  // namespace
}  // namespace ds4::servertest
