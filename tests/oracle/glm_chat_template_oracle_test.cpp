// GLM chat rendering against llama.cpp's GLM-4.7-Flash jinja template, rendered live by a JS
// Jinja engine (tests/oracle/js/glm_chat_render.js; needs node and .cache/jinja, as the V4
// template test). The reference applies GLM 5.2's <think></think> to the template text and maps
// the request onto the template's variables as our renderer does (docs/CHAT_FORMAT.md, "GLM
// 5.2", lists each difference and why). Checks the hand-picked conversations of
// tests/data/chat/conversations.json (and that the committed GLM goldens are still what the
// template renders) and 300 seeded random conversations with tools, calls, results, several
// turns and reasoning.
#include "chat/glm_render.h"
#include "support/chat_case_util.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>

using namespace ds4::chat;
using ds4::chat::test::ojson;

namespace {

const std::filesystem::path kHere = std::filesystem::path(DS4_SOURCE_DIR) / "tests" / "oracle";
const std::filesystem::path kData = kHere / ".." / "data" / "chat";

ojson render_with_jinja(const std::filesystem::path& cases) {
    const std::string cmd = "node \"" + (kHere / "js" / "glm_chat_render.js").string() + "\" \"" + cases.string() + "\"";
    FILE* f = popen(cmd.c_str(), "r");
    if (!f) return {};
    std::string out;
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    const int rc = pclose(f);
    EXPECT_EQ(rc, 0) << "reference renderer failed: " << cmd
                     << " (is node installed and .cache/jinja set up by scripts/setup.sh?)";
    return rc == 0 ? ojson::parse(out) : ojson::array();
}

void expect_matches(const ojson& cases, const ojson& rendered) {
    ASSERT_EQ(rendered.size(), cases.size());
    for (size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(cases[i].at("name").get<std::string>());
        EXPECT_EQ(glm::render_prompt(test::messages_from_case(cases[i]), test::options_from_case(cases[i])).text,
                  rendered[i].at("text").get<std::string>());
    }
}

TEST(GlmChatTemplateOracle, HandPickedConversations) {
    const ojson cases = ojson::parse(test::read_text((kData / "conversations.json").string()));
    const ojson live = render_with_jinja(kData / "conversations.json");
    expect_matches(cases, live);
    EXPECT_EQ(live, ojson::parse(test::read_text((kData / "glm_render_golden.json").string())))
        << "tests/data/chat/glm_render_golden.json is stale: regenerate it with glm_chat_render.js";
}

// Seeded random conversations over the features the template has. Text avoids leading and
// trailing non-ASCII whitespace (Python's and JS's strip() differ there; ours strips ASCII).
ojson random_cases(uint32_t seed, int count) {
    std::mt19937 rng(seed);
    auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
    const std::vector<std::string> words = {"hello", "Ciao «mondo»", "日本語", "👨‍👩‍👧", "a \"q\" b", "x < y & z > w",
                                            "line\nbreak", "tab\there", "", "  ", "<think>", "\n</think>\n", "</tool_response>",
                                            "<|user|>", "<arg_value>", "back\\slash", "mid\u00a0nbsp", "Ελληνικά"};
    auto text = [&]() {
        std::string s;
        for (int i = pick(4); i > 0; --i) s += words[size_t(pick(int(words.size())))] + (pick(2) ? " " : "");
        return s;
    };
    const std::vector<std::string> keys = {"city", "n", "flag", "list", "obj", "text", "ratio"};
    auto value = [&](int depth, auto&& self) -> ojson {
        switch (pick(depth > 1 ? 5 : 7)) {
            case 0: return text();
            case 1: return int64_t(pick(2000)) - 1000;
            case 2: return pick(2) == 0;
            case 3: return nullptr;
            case 4: return double(pick(64)) / 4.0 + 0.25;
            case 5: {
                ojson a = ojson::array();
                for (int i = pick(3); i > 0; --i) a.push_back(self(depth + 1, self));
                return a;
            }
            default: {
                ojson o = ojson::object();
                for (int i = pick(3); i > 0; --i) o[keys[size_t(pick(int(keys.size())))]] = self(depth + 1, self);
                return o;
            }
        }
    };
    const ojson weather = ojson::parse(
        R"({"type": "function", "function": {"name": "get_weather", "description": "Get the weather «now»", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})");
    const ojson search = ojson::parse(
        R"({"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}, "k": {"type": "integer", "default": 5}}}}})");
    ojson cases = ojson::array();
    for (int c = 0; c < count; ++c) {
        ojson cs;
        cs["name"] = "random_" + std::to_string(c);
        cs["thinking"] = std::vector<std::string>{"off", "high", "max"}[size_t(pick(3))];
        cs["add_generation_prompt"] = pick(4) != 0;
        if (pick(5) == 0) cs["drop_thinking"] = false;
        if (pick(2)) cs["tools"] = pick(4) ? ojson::array({weather, search}) : ojson::array();
        ojson msgs = ojson::array();
        if (pick(2)) msgs.push_back({{"role", "system"}, {"content", text()}});
        int call_id = 0;
        std::vector<std::string> open_calls;
        for (int turn = pick(6) + 1; turn > 0; --turn) {
            const int kind = pick(10);
            if (!open_calls.empty() && kind < 7) {
                for (const auto& id : open_calls) msgs.push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text()}});
                open_calls.clear();
                continue;
            }
            if (kind < 4) {
                msgs.push_back({{"role", pick(8) ? "user" : "developer"}, {"content", text()}});
            } else if (kind < 5) {
                msgs.push_back({{"role", "system"}, {"content", text()}});
            } else {
                ojson a = {{"role", "assistant"}, {"content", text()}};
                // An empty reasoning_content stays absent: ours cannot tell "" from absent, and the
                // template splits a content's </think> only when it is absent.
                if (const std::string r = pick(3) ? text() : ""; !r.empty()) a["reasoning_content"] = r;
                if (pick(3) == 0) {
                    ojson calls = ojson::array();
                    for (int k = pick(3) + 1; k > 0; --k) {
                        ojson args = ojson::object();
                        for (int i = pick(4); i > 0; --i) args[keys[size_t(pick(int(keys.size())))]] = value(0, value);
                        const std::string id = "call" + std::to_string(call_id++);
                        open_calls.push_back(id);
                        calls.push_back({{"id", id}, {"type", "function"},
                                         {"function", {{"name", pick(2) ? "get_weather" : "search"}, {"arguments", args.dump()}}}});
                    }
                    a["tool_calls"] = calls;
                }
                msgs.push_back(a);
            }
        }
        cs["messages"] = msgs;
        cases.push_back(cs);
    }
    return cases;
}

TEST(GlmChatTemplateOracle, RandomConversations) {
    const ojson cases = random_cases(20260801, 300);
    const auto path = std::filesystem::temp_directory_path() / ("ds4_glm_chat_random_" + std::to_string(getpid()) + ".json");
    {
        std::FILE* f = std::fopen(path.c_str(), "wb");
        ASSERT_TRUE(f);
        const std::string s = cases.dump();
        std::fwrite(s.data(), 1, s.size(), f);
        std::fclose(f);
    }
    const ojson live = render_with_jinja(path);
    std::filesystem::remove(path);
    expect_matches(cases, live);
}

}  // namespace
