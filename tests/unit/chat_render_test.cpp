// Chat rendering against goldens rendered by llama.cpp's DeepSeek-V4 jinja template
// (tests/data/chat/render_golden.json, produced by tests/oracle/js/chat_render.js from
// conversations.json; the oracle test regenerates them live), plus the cases where we
// deliberately follow the official encoder / DS4 instead of the template.
#include "chat/markers.h"
#include "chat/render.h"
#include "common/error.h"
#include "support/chat_case_util.h"

#include <gtest/gtest.h>

using namespace ds4::chat;
using ds4::chat::test::ojson;

namespace {

const std::string kDir = std::string(DS4_TEST_DATA) + "/chat/";

Message msg(Role role, std::string content) {
    Message m;
    m.role = role;
    m.content = std::move(content);
    return m;
}

TEST(ChatRender, MatchesJinjaGoldens) {
    const ojson cases = ojson::parse(test::read_text(kDir + "conversations.json"));
    const ojson golden = ojson::parse(test::read_text(kDir + "render_golden.json"));
    ASSERT_EQ(cases.size(), golden.size());
    ASSERT_GE(cases.size(), 20u);
    for (size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(cases[i].at("name").get<std::string>());
        ASSERT_EQ(golden[i].at("name"), cases[i].at("name"));
        EXPECT_EQ(render(test::messages_from_case(cases[i]), test::options_from_case(cases[i])),
                  golden[i].at("text").get<std::string>());
    }
}

TEST(ChatRender, SpecExampleOneLiteral) {
    // spec/TOKENIZER_CHAT.md §3.4 Ex 1, written out by hand.
    RenderOptions o;
    o.thinking = ThinkingMode::Off;
    EXPECT_EQ(render({msg(Role::System, "You are a helpful assistant."), msg(Role::User, "Hi!")}, o),
              "<｜begin▁of▁sentence｜>You are a helpful assistant.<｜User｜>Hi!<｜Assistant｜></think>");
}

TEST(ChatRender, ThinkMaxNeedsLargeContext) {
    EXPECT_EQ(effective_thinking(ThinkingMode::Max, 393215), ThinkingMode::High);
    EXPECT_EQ(effective_thinking(ThinkingMode::Max, 393216), ThinkingMode::Max);
    EXPECT_EQ(effective_thinking(ThinkingMode::Off, 1 << 20), ThinkingMode::Off);
    RenderOptions o;
    o.thinking = ThinkingMode::Max;
    o.context_size = 1 << 20;
    const std::string big = render({msg(Role::User, "x")}, o);
    EXPECT_EQ(big.substr(kBos.size(), kThinkMaxPrefix.size()), kThinkMaxPrefix);
    o.context_size = 32768;
    EXPECT_EQ(render({msg(Role::User, "x")}, o).find("Reasoning Effort"), std::string::npos);
}

// Deliberate difference: the template fails on arguments that are not a JSON object; the
// official encoder writes them as one string parameter named "arguments". We do the latter.
TEST(ChatRender, NonObjectArgumentsFollowOfficialEncoder) {
    Message a = msg(Role::Assistant, "");
    a.tool_calls.push_back({"id", "f", "not json {"});
    const std::string s = render_tool_calls(a.tool_calls);
    EXPECT_EQ(s,
              "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n"
              "<｜DSML｜parameter name=\"arguments\" string=\"true\">not json {</｜DSML｜parameter>\n"
              "</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
    a.tool_calls[0].arguments = "[1, 2]";
    EXPECT_NE(render_tool_calls(a.tool_calls).find("name=\"arguments\" string=\"true\">[1, 2]<"),
              std::string::npos);
}

// Deliberate difference: an empty arguments string (some clients send "") is a call without
// arguments; the template would fail to parse it.
TEST(ChatRender, EmptyArgumentsIsZeroArgumentCall) {
    const std::string s = render_tool_calls({{"id", "now", ""}});
    EXPECT_EQ(s, "\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"now\">\n\n</｜DSML｜invoke>\n</｜DSML｜tool_calls>");
}

// Floats: shortest round-trip spelling (what JS prints). llama.cpp's engine would print 6
// significant digits (3.14159) and Python 1.0 as "1.0"; the goldens avoid such values.
TEST(ChatRender, FloatSpelling) {
    const std::string s = render_tool_calls({{"id", "f", R"({"a": 3.14159265, "b": 1.0, "c": 1e21, "d": -0.0})"}});
    EXPECT_NE(s.find(">3.14159265<"), std::string::npos) << s;
    EXPECT_NE(s.find(">1<"), std::string::npos) << s;
    EXPECT_NE(s.find(">1e+21<"), std::string::npos) << s;
    EXPECT_NE(s.find("\"d\" string=\"false\">0<"), std::string::npos) << s;
}

TEST(ChatRender, BadToolsJsonIsAnError) {
    RenderOptions o;
    o.tools_json = "[{";
    EXPECT_THROW(render({msg(Role::User, "x")}, o), ds4::Error);
    o.tools_json = "{\"type\": \"function\"}";
    EXPECT_THROW(render({msg(Role::User, "x")}, o), ds4::Error);
    EXPECT_THROW(role_from_string("robot"), ds4::Error);
}

TEST(ChatRender, ExactToolBlockReplacesTheCanonicalBlock) {
    Message a = msg(Role::Assistant, "");
    a.tool_calls = {{"call_1", "f", R"({"x":1})"}};
    std::vector<Message> messages = {msg(Role::User, "q"), a, msg(Role::Tool, "r")};
    messages[2].tool_call_id = "call_1";
    RenderOptions o;
    o.thinking = ThinkingMode::Off;
    const std::string canonical = render(messages, o);
    const std::string sampled = "\n<" + std::string(kDsml) + "tool_calls>SAMPLED</" + std::string(kDsml) + "tool_calls>";
    std::vector<std::string> seen;
    o.exact_tool_block = [&](const std::vector<ToolCall>& calls) -> std::optional<std::string> {
        for (const auto& c : calls) seen.push_back(c.id);
        return sampled;
    };
    const std::string exact = render(messages, o);
    EXPECT_EQ(seen, std::vector<std::string>{"call_1"});
    std::string expected = canonical;
    const std::string block = render_tool_calls(a.tool_calls);
    expected.replace(expected.find(block), block.size(), sampled);
    EXPECT_EQ(exact, expected);
    o.exact_tool_block = [](const std::vector<ToolCall>&) { return std::optional<std::string>(); };
    EXPECT_EQ(render(messages, o), canonical);
}

TEST(ChatRender, ForcedToolCallOpening) {
    RenderedPrompt p = render_prompt({msg(Role::User, "q")}, RenderOptions{});
    const std::string before = p.text;
    const std::string d(kDsml);
    EXPECT_EQ(append_tool_call_opening(p, true, "get<｜User｜>"),
              "</think>\n\n<" + d + "tool_calls>\n<" + d + "invoke name=\"get<｜User｜>\">\n");
    EXPECT_EQ(p.text.substr(0, before.size()), before);
    ASSERT_FALSE(p.untrusted.empty());  // the tool name stays plain text when tokenized
    EXPECT_EQ(p.text.substr(p.untrusted.back().offset, p.untrusted.back().length), "get<｜User｜>");
    RenderOptions off;
    off.thinking = ThinkingMode::Off;
    RenderedPrompt q = render_prompt({msg(Role::User, "q")}, off);
    EXPECT_EQ(append_tool_call_opening(q, false, ""), "\n\n<" + d + "tool_calls>\n");
}

}  // namespace
