#include "chat/glm_format.h"

#include <algorithm>
#include <utility>

#include "chat/glm_markers.h"
#include "chat/glm_output_parser.h"
#include "chat/glm_render.h"
#include "tokenizer/tokenizer.h"

namespace ds4::chat {
namespace {

class GlmFormat final : public ChatFormat {
public:
    explicit GlmFormat(const tokenizer::Tokenizer& tok) : ChatFormat(tok) {
        using namespace glm;
        markers_.bos = require_marker(kGMask);
        markers_.eos = require_marker(kEndOfText);
        markers_.user = require_marker(kUser);
        markers_.assistant = require_marker(kAssistant);
        markers_.think = require_marker(kThinkStart);
        markers_.think_end = require_marker(kThinkEnd);
        markers_.tool = require_marker(kToolCall);
        // The rest of what the renderer writes and the parser reads: each must be one id.
        for (std::string_view m : {kSop, kToolCallEnd, kToolResponse, kToolResponseEnd, kArgKey, kArgKeyEnd,
                                   kArgValue, kArgValueEnd})
            require_marker(m);
        const int32_t system = require_marker(kSystem), observation = require_marker(kObservation);
        stop_ids_ = {markers_.eos, markers_.user, observation, system, markers_.assistant};
        // A file whose EOS is another token (e.g. <|user|>): generation must stop there too.
        const int32_t file_eos = tok.special().eos;
        if (file_eos >= 0 && std::find(stop_ids_.begin(), stop_ids_.end(), file_eos) == stop_ids_.end())
            stop_ids_.push_back(file_eos);
    }

    std::string_view name() const override { return "glm"; }
    SamplingDefaults sampling_defaults() const override {
        return {.temperature = 1.0f, .top_p = 0.95f, .min_p = 0.0f};
    }

    ThinkingMode effective_thinking(ThinkingMode mode, int64_t) const override {
        return mode == ThinkingMode::Max ? ThinkingMode::High : mode;
    }
    RenderedPrompt render(const std::vector<Message>& messages, const RenderOptions& options) const override {
        return glm::render_prompt(messages, options);
    }
    std::string append_tool_call_opening(RenderedPrompt& prompt, bool thinking,
                                         std::string_view tool) const override {
        return glm::append_tool_call_opening(prompt, thinking, tool);
    }
    // The reply ended at a stop token that is not in the session: <|user|>text<|assistant|>,
    // then <think> or, without thinking, <think></think>.
    RenderedPrompt next_user_turn(std::string_view user, ThinkingMode mode) const override {
        RenderedPrompt p;
        p.text = std::string(glm::kUser);
        if (!user.empty()) p.untrusted.push_back({p.text.size(), user.size()});
        p.text += user;
        p.text += glm::kAssistant;
        p.text += glm::kThinkStart;
        if (mode == ThinkingMode::Off) p.text += glm::kThinkEnd;
        return p;
    }
    std::string render_tool_calls(const std::vector<ToolCall>& calls) const override {
        return glm::render_tool_calls(calls);
    }

    std::unique_ptr<StreamParser> new_parser(OutputParserOptions options) const override {
        return std::make_unique<glm::OutputParser>(std::move(options));
    }
    ParsedOutput parse(std::string_view text, OutputParserOptions options) const override {
        return glm::parse_output(text, std::move(options));
    }
    std::unique_ptr<ToolTracker> new_tool_tracker(bool thinking) const override {
        return new_glm_tool_tracker(thinking);
    }
};

}  // namespace

std::unique_ptr<ChatFormat> make_glm_format(const tokenizer::Tokenizer& tok) {
    return std::make_unique<GlmFormat>(tok);
}

}  // namespace ds4::chat
