// ds4-server's log-probabilities (docs/SERVER.md "Log-probabilities"): chat's `logprobs` /
// `top_logprobs` and legacy completions' `logprobs: N`, streamed and not. The first answer
// token's numbers are checked against a log-softmax computed here from the logits `ds4
// --dump-logits-f32` writes for the same prompt tokens, so they do not rest on the server's code.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "server_process.h"
#include "support/tool_run.h"

namespace ds4::servertest {
namespace {

using json = nlohmann::json;

json greedy_chat(const std::string& text, int top, int max_tokens = 6) {
    return {{"messages", {{{"role", "user"}, {"content", text}}}}, {"max_tokens", max_tokens},
            {"temperature", 0}, {"thinking", {{"type", "disabled"}}}, {"logprobs", true},
            {"top_logprobs", top}};
}

json with_fields(json a, const json& b) {
    a.update(b);
    return a;
}

std::string bytes_of(const json& entry) {
    std::string s;
    for (const auto& b : entry["bytes"]) s.push_back(char(b.get<int>()));
    return s;
}

// The prompt the server renders for one user message without thinking, as token ids.
std::vector<int32_t> prompt_ids(const std::string& text) {
    const auto r = test::run_command({test::binary("ds4"), "-m", tiny_model(), "--dump-tokens", "-p", text, "--nothink", "-sys", ""});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::vector<int32_t> ids;
    std::istringstream lines(r.output);
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty() || line.find_first_not_of("0123456789 ") != std::string::npos) continue;
        std::istringstream in(line);
        ids.clear();
        for (int32_t id; in >> id;) ids.push_back(id);
    }
    return ids;
}

// log-softmax of the logits after the last prompt token, from ds4's own evaluation.
std::vector<double> reference_logprobs(const std::vector<int32_t>& ids) {
    test::TempDir dir;
    test::write_token_ids(dir.file("ids.txt"), ids);
    const auto r = test::run_command({test::binary("ds4"), "-m", tiny_model(), "--token-ids", dir.file("ids.txt"),
                                      "--dump-logits-f32", dir.file("logits.f32")});
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::ifstream f(dir.file("logits.f32"), std::ios::binary | std::ios::ate);
    const size_t bytes = size_t(f.tellg());
    const size_t n_vocab = bytes / sizeof(float) / ids.size();
    std::vector<float> last(n_vocab);
    f.seekg(std::streamoff((ids.size() - 1) * n_vocab * sizeof(float)));
    f.read(reinterpret_cast<char*>(last.data()), std::streamsize(n_vocab * sizeof(float)));
    double max = -INFINITY, sum = 0;
    for (float x : last) max = std::max(max, double(x));
    for (float x : last) sum += std::exp(double(x) - max);
    std::vector<double> out(n_vocab);
    for (size_t i = 0; i < n_vocab; ++i) out[i] = double(last[i]) - max - std::log(sum);
    return out;
}

TEST(ServerLogprobs, ChatFirstTokenMatchesTheModelsDistribution) {
    ServerProcess s({"--ctx", "2048"});
    const std::string text = "Tell me about rivers.";
    const HttpResult r = post(s.url() + "/v1/chat/completions", greedy_chat(text, 5));
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    const json& content = j["choices"][0]["logprobs"]["content"];
    ASSERT_TRUE(content.is_array());
    ASSERT_EQ(int64_t(content.size()), j["usage"]["completion_tokens"].get<int64_t>());

    const std::vector<int32_t> ids = prompt_ids(text);
    ASSERT_EQ(int64_t(ids.size()), j["usage"]["prompt_tokens"].get<int64_t>());
    const std::vector<double> ref = reference_logprobs(ids);
    // Greedy: the first token is the reference's argmax, with its log-probability.
    const size_t argmax = size_t(std::max_element(ref.begin(), ref.end()) - ref.begin());
    EXPECT_NEAR(content[0]["logprob"].get<double>(), ref[argmax], 1e-4);
    // The five alternatives are the reference's five most likely, in order, with their values.
    std::vector<size_t> order(ref.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::partial_sort(order.begin(), order.begin() + 5, order.end(), [&](size_t a, size_t b) { return ref[a] > ref[b]; });
    const json& top = content[0]["top_logprobs"];
    ASSERT_EQ(top.size(), 5u);
    for (size_t k = 0; k < 5; ++k) EXPECT_NEAR(top[k]["logprob"].get<double>(), ref[order[k]], 1e-4) << k;
    EXPECT_EQ(bytes_of(content[0]), bytes_of(top[0]));
}

TEST(ServerLogprobs, ChatEntriesSpellTheAnswerAndStreamTheSame) {
    ServerProcess s({"--ctx", "2048"});
    const json req = greedy_chat("Name three colours.", 3, 8);
    const HttpResult r = post(s.url() + "/v1/chat/completions", req);
    ASSERT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    const json& content = j["choices"][0]["logprobs"]["content"];
    std::string spelled;
    for (const auto& e : content) {
        spelled += bytes_of(e);
        const double lp = e["logprob"].get<double>();
        EXPECT_LE(lp, 0.0);
        ASSERT_EQ(e["top_logprobs"].size(), 3u);
        EXPECT_EQ(e["token"].get<std::string>().empty(), bytes_of(e).empty());
        // Greedy: the sampled token is the most likely alternative.
        EXPECT_EQ(bytes_of(e), bytes_of(e["top_logprobs"][0]));
        EXPECT_DOUBLE_EQ(lp, e["top_logprobs"][0]["logprob"].get<double>());
        double mass = 0;
        for (size_t k = 0; k < 3; ++k) {
            if (k > 0) {
                EXPECT_GE(e["top_logprobs"][k - 1]["logprob"].get<double>(), e["top_logprobs"][k]["logprob"].get<double>());
            }
            mass += std::exp(e["top_logprobs"][k]["logprob"].get<double>());
        }
        EXPECT_LE(mass, 1.0 + 1e-6);
    }
    EXPECT_EQ(spelled, j["choices"][0]["message"]["content"].get<std::string>());

    // Streamed: the same entries, one chunk each.
    json sreq = req;
    sreq["stream"] = true;
    const HttpResult st = post(s.url() + "/v1/chat/completions", sreq);
    ASSERT_EQ(st.status, 200);
    json streamed = json::array();
    for (const auto& e : parse_sse(st.body)) {
        if (e.event == "comment" || e.data == "[DONE]") continue;
        const json c = json::parse(e.data);
        if (c["choices"].empty()) continue;
        const json& lp = c["choices"][0]["logprobs"];
        if (lp.is_object())
            for (const auto& entry : lp["content"]) streamed.push_back(entry);
    }
    EXPECT_EQ(streamed, content);

    // Not asked: null, as before.
    json plain = req;
    plain.erase("logprobs");
    plain.erase("top_logprobs");
    EXPECT_TRUE(post(s.url() + "/v1/chat/completions", plain).json()["choices"][0]["logprobs"].is_null());
}

TEST(ServerLogprobs, CompletionsParallelArrays) {
    ServerProcess s({"--ctx", "2048"});
    json req = {{"prompt", "Once upon a time"}, {"max_tokens", 6}, {"temperature", 0}, {"logprobs", 2},
                {"thinking", {{"type", "disabled"}}}};
    const HttpResult r = post(s.url() + "/v1/completions", req);
    ASSERT_EQ(r.status, 200) << r.body;
    const json c = r.json()["choices"][0];
    const json& lp = c["logprobs"];
    const size_t n = lp["tokens"].size();
    ASSERT_EQ(int64_t(n), r.json()["usage"]["completion_tokens"].get<int64_t>());
    ASSERT_EQ(lp["token_logprobs"].size(), n);
    ASSERT_EQ(lp["top_logprobs"].size(), n);
    ASSERT_EQ(lp["text_offset"].size(), n);
    std::string joined;
    for (size_t i = 0; i < n; ++i) {
        EXPECT_EQ(lp["text_offset"][i].get<size_t>(), joined.size());
        joined += lp["tokens"][i].get<std::string>();
        EXPECT_LE(lp["top_logprobs"][i].size(), 2u);  // a dict: two alternatives may share a spelling
        EXPECT_GE(lp["top_logprobs"][i].size(), 1u);
    }
    // Tokens are whole UTF-8 here only when the answer is; compare bytes after the same repair.
    EXPECT_EQ(json(joined).dump(-1, ' ', false, json::error_handler_t::replace),
              json(c["text"].get<std::string>()).dump(-1, ' ', false, json::error_handler_t::replace));
}

TEST(ServerLogprobs, BadValuesAreRefusedWithTheParameter) {
    ServerProcess s({"--ctx", "2048"});
    auto refused = [&](const std::string& path, const json& body, const std::string& param) {
        const HttpResult r = post(s.url() + path, body);
        EXPECT_EQ(r.status, 400) << r.body;
        EXPECT_EQ(r.json()["error"]["param"], param) << r.body;
    };
    const json msgs = {{"messages", {{{"role", "user"}, {"content", "x"}}}}};
    refused("/v1/chat/completions", with_fields(msgs, {{"logprobs", true}, {"top_logprobs", 21}}), "top_logprobs");
    refused("/v1/chat/completions", with_fields(msgs, {{"logprobs", true}, {"top_logprobs", -1}}), "top_logprobs");
    refused("/v1/chat/completions", with_fields(msgs, {{"top_logprobs", 2}}), "top_logprobs");
    refused("/v1/chat/completions", with_fields(msgs, {{"logprobs", "yes"}}), "logprobs");
    refused("/v1/completions", {{"prompt", "x"}, {"logprobs", 21}}, "logprobs");
    refused("/v1/completions", {{"prompt", "x"}, {"logprobs", true}}, "logprobs");
}

}  // namespace
}  // namespace ds4::servertest
