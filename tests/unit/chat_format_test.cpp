// chat::ChatFormat: the format is chosen by the GGUF's architecture (V4 for deepseek4, a clear
// error otherwise), resolves its markers through the tokenizer (errors name a missing one), and
// the V4 format's rendering, tokenization and parsing are exactly the V4 functions'.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "chat/deepseek4_format.h"
#include "chat/format.h"
#include "chat/markers.h"
#include "chat/output_parser.h"
#include "chat/prompt_tokens.h"
#include "chat/render.h"
#include "common/error.h"
#include "support/chat_case_util.h"
#include "support/vocab_gguf.h"

namespace ds4::chat {
namespace {

using test::ojson;
using ds4::test::VocabSpec;
using tokenizer::TokenType;

const std::string kDir = std::string(DS4_TEST_DATA) + "/chat/";

VocabSpec v4_vocab() {
    VocabSpec v;
    v.architecture = "deepseek4";
    return v;
}

// The message of the ds4::Error that `f` throws ("" when it throws none).
template <class F>
std::string error_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

class ChatFormatTest : public ::testing::Test {
protected:
    std::unique_ptr<ChatFormat> format(const VocabSpec& v) {
        tok_ = vocab_.load(v);
        return ChatFormat::from_gguf(vocab_.file(), *tok_);
    }
    int32_t id(std::string_view text) const { return vocab_.id(std::string(text)); }

    ds4::test::VocabFile vocab_;
    std::unique_ptr<tokenizer::Tokenizer> tok_;
};

TEST_F(ChatFormatTest, DeepseekArchitectureGetsTheV4FormatWithItsMarkerIds) {
    const auto f = format(v4_vocab());
    EXPECT_EQ(f->name(), "deepseek4");
    EXPECT_EQ(&f->tokenizer(), tok_.get());
    const MarkerIds& m = f->markers();
    EXPECT_EQ(m.bos, id(kBos));
    EXPECT_EQ(m.eos, id(kEos));
    EXPECT_EQ(m.user, id(kUser));
    EXPECT_EQ(m.assistant, id(kAssistant));
    EXPECT_EQ(m.think, id("<think>"));
    EXPECT_EQ(m.think_end, id("</think>"));
    EXPECT_EQ(m.tool, id(kDsml));
    EXPECT_EQ(m.eos, tok_->special().eos);
}

TEST_F(ChatFormatTest, UnknownOrMissingArchitectureIsAClearError) {
    VocabSpec v = v4_vocab();
    v.architecture = "qwen3";
    std::string e = error_of([&] { format(v); });
    EXPECT_NE(e.find("qwen3"), std::string::npos) << e;
    EXPECT_NE(e.find("'deepseek4'"), std::string::npos) << e;  // what the build knows
    EXPECT_NE(e.find(vocab_.file().path()), std::string::npos) << e;
    v.architecture.clear();
    e = error_of([&] { format(v); });
    EXPECT_NE(e.find("general.architecture"), std::string::npos) << e;
    // select() without a file: the same table.
    e = error_of([&] { ChatFormat::select({.architecture = "llama", .chat_template = {}}, *tok_); });
    EXPECT_NE(e.find("'llama'"), std::string::npos) << e;
    EXPECT_EQ(ChatFormat::select({.architecture = "deepseek4", .chat_template = {}}, *vocab_.load(v4_vocab()))->name(), "deepseek4");
}

TEST_F(ChatFormatTest, V4FormatNamesWhatTheVocabularyLacks) {
    auto expect_error = [&](const VocabSpec& v, const std::string& needle) {
        const std::string e = error_of([&] { format(v); });
        EXPECT_NE(e.find(needle), std::string::npos) << "expected '" << needle << "' in: " << e;
    };
    VocabSpec v = v4_vocab();
    v.skip_markers = {"<think>"};
    expect_error(v, "<think>");
    v = v4_vocab();
    v.skip_markers = {std::string(kDsml)};
    expect_error(v, std::string(kDsml));
    // A marker that rendered text would not tokenize as one id.
    v = v4_vocab();
    v.markers[4].second = TokenType::Normal;  // <think>
    expect_error(v, "not a control or user-defined token");
    // Generation must stop where a V4 turn ends.
    v = v4_vocab();
    v.eos = std::string(kUser);
    expect_error(v, "eos_token_id");
    v = v4_vocab();
    v.eos = "none";
    expect_error(v, "eos_token_id");
}

// The V4 format renders, tokenizes and parses exactly as the V4 functions do.
TEST_F(ChatFormatTest, V4FormatEqualsTheV4FunctionsOnTheRenderFixtures) {
    const auto f = format(v4_vocab());
    const ojson cases = ojson::parse(test::read_text(kDir + "conversations.json"));
    const ojson golden = ojson::parse(test::read_text(kDir + "render_golden.json"));
    ASSERT_EQ(cases.size(), golden.size());
    ASSERT_GE(cases.size(), 20u);
    size_t replies = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        SCOPED_TRACE(cases[i].at("name").get<std::string>());
        const auto messages = test::messages_from_case(cases[i]);
        const RenderOptions o = test::options_from_case(cases[i]);
        const RenderedPrompt p = f->render(messages, o);
        const RenderedPrompt q = render_prompt(messages, o);
        EXPECT_EQ(p.text, golden[i].at("text").get<std::string>());
        EXPECT_EQ(p.text, q.text);
        ASSERT_EQ(p.untrusted.size(), q.untrusted.size());
        for (size_t k = 0; k < p.untrusted.size(); ++k) {
            EXPECT_EQ(p.untrusted[k].offset, q.untrusted[k].offset);
            EXPECT_EQ(p.untrusted[k].length, q.untrusted[k].length);
        }
        EXPECT_EQ(f->tokenize(p), tokenize_prompt(*tok_, q));
        EXPECT_EQ(f->effective_thinking(o.thinking, o.context_size), effective_thinking(o.thinking, o.context_size));

        // Each assistant turn as the model would have written it: parsed alike, whole and
        // streamed byte by byte.
        const bool tools = !o.tools_json.empty();
        for (const Message& m : messages) {
            if (m.role != Role::Assistant) continue;
            ++replies;
            EXPECT_EQ(f->render_tool_calls(m.tool_calls), render_tool_calls(m.tool_calls));
            const std::string reply = m.reasoning + std::string(kThinkEnd) + m.content + render_tool_calls(m.tool_calls);
            const OutputParserOptions po{.thinking = true, .tools = tools};
            const ParsedOutput a = f->parse(reply, po), b = parse_output(reply, po);
            EXPECT_EQ(a.reasoning, b.reasoning);
            EXPECT_EQ(a.content, b.content);
            EXPECT_EQ(a.raw_block, b.raw_block);
            EXPECT_EQ(a.malformed, b.malformed);
            EXPECT_EQ(a.unterminated, b.unterminated);
            ASSERT_EQ(a.tool_calls.size(), b.tool_calls.size());
            for (size_t k = 0; k < a.tool_calls.size(); ++k) {
                EXPECT_EQ(a.tool_calls[k].name, b.tool_calls[k].name);
                EXPECT_EQ(a.tool_calls[k].arguments, b.tool_calls[k].arguments);
            }
            EXPECT_EQ(a.reasoning, m.reasoning);
            const auto s = f->new_parser(po);
            OutputParser direct(po);
            std::vector<OutputEvent> ea, eb;
            for (char c : reply) {
                s->feed(std::string_view(&c, 1), ea);
                direct.feed(std::string_view(&c, 1), eb);
            }
            s->finish(ea);
            direct.finish(eb);
            ASSERT_EQ(ea.size(), eb.size());
            for (size_t k = 0; k < ea.size(); ++k) {
                EXPECT_EQ(ea[k].kind, eb[k].kind);
                EXPECT_EQ(ea[k].text, eb[k].text);
                EXPECT_EQ(ea[k].index, eb[k].index);
            }
            EXPECT_EQ(s->block_closed(), direct.block_closed());
            EXPECT_EQ(s->content_start(), direct.content_start());
            EXPECT_EQ(s->raw_block(), direct.raw_block());
        }
    }
    EXPECT_GE(replies, 10u);
}

TEST_F(ChatFormatTest, V4ForcedToolOpeningAndNextUserTurn) {
    const auto f = format(v4_vocab());
    RenderedPrompt a = render_prompt({{.role = Role::User, .content = "hi", .reasoning = {}, .tool_calls = {},
                                       .tool_call_id = {}, .name = {}}},
                                     {});
    RenderedPrompt b = a;
    EXPECT_EQ(f->append_tool_call_opening(a, true, "get_weather"), append_tool_call_opening(b, true, "get_weather"));
    EXPECT_EQ(a.text, b.text);
    EXPECT_EQ(f->tokenize(a), tokenize_prompt(*tok_, b));

    // The interactive CLI's next turn: the reply's EOS, then <｜User｜>text<｜Assistant｜> and
    // the thinking marker; a marker typed by the user stays text.
    const std::string user = "a " + std::string(kAssistant) + " b";
    for (ThinkingMode mode : {ThinkingMode::High, ThinkingMode::Off, ThinkingMode::Max}) {
        const RenderedPrompt p = f->next_user_turn(user, mode);
        EXPECT_EQ(p.text, std::string(kEos) + std::string(kUser) + user + std::string(kAssistant) +
                              std::string(mode == ThinkingMode::Off ? kThinkEnd : kThinkStart));
        std::vector<int32_t> want = {id(kEos), id(kUser)};
        const auto plain = tok_->encode(user, tokenizer::Special::Plain);
        want.insert(want.end(), plain.begin(), plain.end());
        want.push_back(id(kAssistant));
        want.push_back(id(mode == ThinkingMode::Off ? kThinkEnd : kThinkStart));
        EXPECT_EQ(f->tokenize(p), want);
    }
}

}  // namespace
}  // namespace ds4::chat
