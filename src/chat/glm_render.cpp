#include "chat/glm_render.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <optional>
#include <string_view>

#include "chat/glm_markers.h"
#include "chat/json_text.h"
#include "chat/prompt_builder.h"
#include "common/error.h"

namespace ds4::chat::glm {
namespace {

using ojson = nlohmann::ordered_json;

// The template's tools system turn, around the tool list (one JSON line per tool).
constexpr std::string_view kToolsHead =
    "<|system|>\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n";
constexpr std::string_view kToolsTail =
    "</tools>\n\nFor each function call, output the function name and arguments within the "
    "following XML format:\n<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>"
    "{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>"
    "...</tool_call>";

// Python's str.strip() on the ASCII whitespace (what the template strips in practice).
constexpr std::string_view kStripChars = " \t\n\r\v\f";

std::string_view strip(std::string_view s) {
    const size_t b = s.find_first_not_of(kStripChars);
    if (b == std::string_view::npos) return {};
    return s.substr(b, s.find_last_not_of(kStripChars) - b + 1);
}

ojson parse_json(const std::string& text, const char* what) {
    try {
        return ojson::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail("chat: {} is not valid JSON: {}", what, e.what());
    }
}

// The tools array, or an empty one (the template tests `tools` for truthiness).
ojson tools_array(const std::string& tools_json) {
    if (tools_json.empty()) return ojson::array();
    ojson tools = parse_json(tools_json, "tools");
    if (!tools.is_array()) fail("chat: tools must be a JSON array, found {}", tools.type_name());
    return tools;
}

void tools_turn(PromptBuilder& b, const ojson& tools) {
    b.t(kToolsHead);
    for (const auto& tool : tools) {
        b.u(python_style(tool));
        b.t("\n");
    }
    b.t(kToolsTail);
}

void one_call(PromptBuilder& b, const ToolCall& call) {
    b.t(kToolCall);
    b.u(call.name);
    ojson args = ojson::object();
    if (call.arguments.find_first_not_of(" \t\r\n") != std::string::npos) {
        // Arguments that are not a JSON object become one string argument (the template would
        // fail on them; upstream writes them so).
        args = ojson::parse(call.arguments, nullptr, false);
        if (args.is_discarded() || !args.is_object()) args = ojson{{"arguments", call.arguments}};
    }
    for (auto it = args.begin(); it != args.end(); ++it) {
        b.t(kArgKey);
        b.u(it.key());
        b.t(kArgKeyEnd);
        b.t(kArgValue);
        b.u(it.value().is_string() ? it.value().get_ref<const std::string&>() : python_style(it.value()));
        b.t(kArgValueEnd);
    }
    b.t(kToolCallEnd);
}

void tool_calls(PromptBuilder& b, const std::vector<ToolCall>& calls) {
    for (const ToolCall& c : calls) one_call(b, c);
}

// The template's reasoning of an assistant message: reasoning_content, or when there is none
// and the content holds </think>, the text the content's first </think> closes (after its
// last <think>), the content then being what follows the last </think>.
void split_reasoning(const Message& m, std::string_view& reasoning, std::string_view& content) {
    reasoning = m.reasoning;
    content = m.content;
    const size_t first_end = content.find(kThinkEnd);
    if (!reasoning.empty() || first_end == std::string_view::npos) return;
    std::string_view r = content.substr(0, first_end);
    while (!r.empty() && r.back() == '\n') r.remove_suffix(1);
    if (const size_t open = r.rfind(kThinkStart); open != std::string_view::npos) r.remove_prefix(open + kThinkStart.size());
    while (!r.empty() && r.front() == '\n') r.remove_prefix(1);
    reasoning = r;
    content.remove_prefix(content.rfind(kThinkEnd) + kThinkEnd.size());
    while (!content.empty() && content.front() == '\n') content.remove_prefix(1);
}

void assistant_turn(PromptBuilder& b, const Message& m, bool keep_reasoning, const RenderOptions& options) {
    b.t(kAssistant);
    std::string_view reasoning, content;
    split_reasoning(m, reasoning, content);
    b.t(kThinkStart);
    if (keep_reasoning && !reasoning.empty()) b.u(strip(reasoning));
    b.t(kThinkEnd);
    b.u(strip(content));
    std::optional<std::string> exact;
    if (!m.tool_calls.empty() && options.exact_tool_block) exact = options.exact_tool_block(m.tool_calls);
    if (exact) b.t(*exact);
    else tool_calls(b, m.tool_calls);
}

}  // namespace

RenderedPrompt render_prompt(const std::vector<Message>& messages, const RenderOptions& options) {
    PromptBuilder b;
    b.t(kGMask);
    b.t(kSop);
    const ojson tools = tools_array(options.tools_json);
    if (!tools.empty()) tools_turn(b, tools);

    // Reasoning is kept after the last user message; tool results do not count as user turns.
    ptrdiff_t last_user = -1;
    for (size_t i = 0; i < messages.size(); ++i)
        if (messages[i].role == Role::User) last_user = ptrdiff_t(i);

    for (size_t i = 0; i < messages.size(); ++i) {
        const Message& m = messages[i];
        switch (m.role) {
            case Role::System:
            case Role::Developer:
                b.t(kSystem);
                b.u(m.content);
                break;
            case Role::User:
                b.t(kUser);
                b.u(m.content);
                break;
            case Role::Tool:
                if (i == 0 || messages[i - 1].role != Role::Tool) b.t(kObservation);
                b.t(kToolResponse);
                b.u(m.content);
                b.t(kToolResponseEnd);
                break;
            case Role::Assistant:
                assistant_turn(b, m, !options.drop_thinking || ptrdiff_t(i) > last_user, options);
                break;
        }
    }
    if (options.add_generation_prompt) {
        b.t(kAssistant);
        b.t(kThinkStart);
        if (options.thinking == ThinkingMode::Off) b.t(kThinkEnd);
    }
    return std::move(b.p);
}

std::string render_tool_calls(const std::vector<ToolCall>& calls) {
    PromptBuilder b;
    tool_calls(b, calls);
    return std::move(b.p.text);
}

std::string append_tool_call_opening(RenderedPrompt& prompt, bool thinking, std::string_view tool) {
    PromptBuilder b;
    b.p = std::move(prompt);
    const size_t start = b.p.text.size();
    if (thinking) b.t(kThinkEnd);
    b.t(kToolCall);
    b.u(tool);
    prompt = std::move(b.p);
    return prompt.text.substr(start);
}

}  // namespace ds4::chat::glm
