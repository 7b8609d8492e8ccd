#include "chat/deepseek4_format.h"

#include "chat/markers.h"
#include "chat/output_parser.h"
#include "chat/render.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace ds4::chat {
namespace {

class Deepseek4Format final : public ChatFormat {
public:
    explicit Deepseek4Format(const tokenizer::Tokenizer& tok) : ChatFormat(tok) {
        markers_.bos = require_marker(kBos);
        markers_.eos = require_marker(kEos);
        markers_.user = require_marker(kUser);
        markers_.assistant = require_marker(kAssistant);
        markers_.think = require_marker(kThinkStart);
        markers_.think_end = require_marker(kThinkEnd);
        markers_.tool = require_marker(kDsml);
        if (tok.special().eos != markers_.eos)
            fail("tokenizer.ggml.eos_token_id is {}, but the DeepSeek V4 chat format ends a turn "
                 "with '{}' (id {})", tok.special().eos, kEos, markers_.eos);
        stop_ids_ = {markers_.eos};
    }

    std::string_view name() const override { return "deepseek4"; }
    SamplingDefaults sampling_defaults() const override { return {}; }

    ThinkingMode effective_thinking(ThinkingMode mode, int64_t context_size) const override {
        return chat::effective_thinking(mode, context_size);
    }
    RenderedPrompt render(const std::vector<Message>& messages, const RenderOptions& options) const override {
        return render_prompt(messages, options);
    }
    std::string append_tool_call_opening(RenderedPrompt& prompt, bool thinking,
                                         std::string_view tool) const override {
        return chat::append_tool_call_opening(prompt, thinking, tool);
    }
    // The reply's EOS, then <｜User｜>text<｜Assistant｜> and <think> (or </think> without thinking).
    RenderedPrompt next_user_turn(std::string_view user, ThinkingMode mode) const override {
        RenderedPrompt p;
        p.text = std::string(kEos);
        p.text += kUser;
        if (!user.empty()) p.untrusted.push_back({p.text.size(), user.size()});
        p.text += user;
        p.text += kAssistant;
        p.text += mode == ThinkingMode::Off ? kThinkEnd : kThinkStart;
        return p;
    }
    std::string render_tool_calls(const std::vector<ToolCall>& calls) const override {
        return chat::render_tool_calls(calls);
    }

    std::unique_ptr<StreamParser> new_parser(OutputParserOptions options) const override {
        return std::make_unique<OutputParser>(options);
    }
    ParsedOutput parse(std::string_view text, OutputParserOptions options) const override {
        return parse_output(text, options);
    }
    std::unique_ptr<ToolTracker> new_tool_tracker(bool thinking) const override { return new_dsml_tracker(thinking); }
};

}  // namespace

std::unique_ptr<ChatFormat> make_deepseek4_format(const tokenizer::Tokenizer& tok) {
    return std::make_unique<Deepseek4Format>(tok);
}

}  // namespace ds4::chat
