#include "chat/render.h"

#include "chat/json_text.h"
#include "chat/markers.h"
#include "chat/prompt_builder.h"
#include "common/error.h"

#include <algorithm>
#include <map>

namespace ds4::chat {

using ojson = nlohmann::ordered_json;

namespace {
using Builder = PromptBuilder;
}  // namespace

const std::string_view kThinkMaxPrefix =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem to "
    "resolve the root cause, rigorously stress-testing your logic against all potential paths, "
    "edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate "
    "step, considered alternative, and rejected hypothesis to ensure absolutely no assumption is "
    "left unchecked.\n\n";

ThinkingMode effective_thinking(ThinkingMode mode, int64_t context_size) {
    if (mode == ThinkingMode::Max && context_size < kThinkMaxMinContext) return ThinkingMode::High;
    return mode;
}

static ojson parse_json(const std::string& text, const char* what) {
    try {
        return ojson::parse(text);
    } catch (const nlohmann::json::exception& e) {
        fail("chat: {} is not valid JSON: {}", what, e.what());
    }
}

static void tools_block(Builder& b, const std::string& tools_json) {
    const ojson tools = parse_json(tools_json, "tools");
    if (!tools.is_array()) fail("chat: tools must be a JSON array, found {}", tools.type_name());
    const std::string d(kDsml);
    b.t(
        "## Tools\n\nYou have access to a set of tools to help answer the user's question. You "
        "can invoke tools by writing a \"<" + d + "tool_calls>\" block like the following:\n\n"
        "<" + d + "tool_calls>\n<" + d + "invoke name=\"$TOOL_NAME\">\n<" + d +
        "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</" + d +
        "parameter>\n...\n</" + d + "invoke>\n<" + d + "invoke name=\"$TOOL_NAME2\">\n...\n</" + d +
        "invoke>\n</" + d + "tool_calls>\n\n"
        "String parameters should be specified as is and set `string=\"true\"`. For all other "
        "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
        "`string=\"false\"`.\n\n"
        "If thinking_mode is enabled (triggered by <think>), you MUST output your complete "
        "reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
        "Otherwise, output directly after </think> with tool calls or final response.\n\n"
        "### Available Tool Schemas\n\n");
    for (const auto& tool : tools) {
        // The template lists only entries of type "function"; others are skipped silently.
        if (!tool.is_object() || tool.value("type", std::string()) != "function") continue;
        b.u(python_style(tool.contains("function") ? tool.at("function") : ojson()));
        b.t("\n");
    }
    b.t("\nYou MUST strictly follow the above defined tool name and parameter schemas to "
        "invoke tool calls.\n");
}

std::string render_tools_block(const std::string& tools_json) {
    Builder b;
    tools_block(b, tools_json);
    return std::move(b.p.text);
}

static bool has_tools(const std::string& tools_json) {
    if (tools_json.empty()) return false;
    const ojson tools = parse_json(tools_json, "tools");
    if (!tools.is_array()) fail("chat: tools must be a JSON array, found {}", tools.type_name());
    return !tools.empty();  // the template tests `tools` for truthiness: [] means no tools
}

static void render_one_call(Builder& b, const ToolCall& call) {
    const std::string d(kDsml);
    b.t("<" + d + "invoke name=\"");
    b.u(call.name);
    b.t("\">\n");
    ojson args = ojson::object();
    const bool blank = call.arguments.find_first_not_of(" \t\r\n") == std::string::npos;
    if (!blank) {
        // Arguments that are not a JSON object become one raw string parameter named
        // "arguments", as the official encoder does (the jinja template would fail instead).
        args = ojson::parse(call.arguments, nullptr, false);
        if (args.is_discarded() || !args.is_object()) args = ojson{{"arguments", call.arguments}};
    }
    for (auto it = args.begin(); it != args.end(); ++it) {
        const bool is_string = it.value().is_string();
        b.t("<" + d + "parameter name=\"");
        b.u(it.key());
        b.t(std::string("\" string=\"") + (is_string ? "true" : "false") + "\">");
        b.u(is_string ? it.value().get_ref<const std::string&>() : python_style(it.value()));
        b.t("</" + d + "parameter>\n");
    }
    if (args.empty()) b.t("\n");  // official format: an empty line between the invoke tags
    b.t("</" + d + "invoke>\n");
}

static void tool_calls_block(Builder& b, const std::vector<ToolCall>& calls) {
    if (calls.empty()) return;
    const std::string d(kDsml);
    b.t("\n\n<" + d + "tool_calls>\n");
    for (const auto& call : calls) render_one_call(b, call);
    b.t("</" + d + "tool_calls>");
}

std::string render_tool_calls(const std::vector<ToolCall>& calls) {
    Builder b;
    tool_calls_block(b, calls);
    return std::move(b.p.text);
}

std::string append_tool_call_opening(RenderedPrompt& prompt, bool thinking, std::string_view tool) {
    Builder b;
    b.p = std::move(prompt);
    const size_t start = b.p.text.size();
    const std::string d(kDsml);
    if (thinking) b.t(kThinkEnd);
    b.t("\n\n<" + d + "tool_calls>\n");
    if (!tool.empty()) {
        b.t("<" + d + "invoke name=\"");
        b.u(tool);
        b.t("\">\n");
    }
    prompt = std::move(b.p);
    return prompt.text.substr(start);
}

// llama.cpp renders consecutive tool results in the order of the preceding assistant message's
// tool_calls (matched by id; unknown ids count as position 0), like the official encoder. Only
// the tool messages inside a run of user/tool messages are permuted (stable sort).
static std::vector<const Message*> order_tool_results(const std::vector<Message>& messages) {
    std::vector<const Message*> out;
    out.reserve(messages.size());
    for (const auto& m : messages) out.push_back(&m);
    std::map<std::string, size_t> call_order;
    for (size_t i = 0; i < out.size();) {
        const Message& m = *out[i];
        if (m.role == Role::Assistant && !m.tool_calls.empty()) {
            call_order.clear();
            for (size_t k = 0; k < m.tool_calls.size(); ++k) {
                if (!m.tool_calls[k].id.empty()) call_order[m.tool_calls[k].id] = k;
            }
            ++i;
            continue;
        }
        if (m.role != Role::User && m.role != Role::Tool) {
            ++i;
            continue;
        }
        std::vector<size_t> tool_pos;
        size_t end = i;
        for (; end < out.size(); ++end) {
            if (out[end]->role == Role::Tool) {
                tool_pos.push_back(end);
            } else if (out[end]->role != Role::User) {
                break;
            }
        }
        if (tool_pos.size() > 1 && !call_order.empty()) {
            auto rank = [&](const Message* r) {
                auto it = call_order.find(r->tool_call_id);
                return it == call_order.end() ? size_t{0} : it->second;
            };
            std::vector<const Message*> results;
            for (size_t p : tool_pos) results.push_back(out[p]);
            std::stable_sort(results.begin(), results.end(),
                             [&](const Message* a, const Message* b) { return rank(a) < rank(b); });
            for (size_t k = 0; k < tool_pos.size(); ++k) out[tool_pos[k]] = results[k];
        }
        i = end;
    }
    return out;
}

RenderedPrompt render_prompt(const std::vector<Message>& messages, const RenderOptions& options) {
    const ThinkingMode mode = effective_thinking(options.thinking, options.context_size);
    const bool thinking = mode != ThinkingMode::Off;
    const bool tools = has_tools(options.tools_json);

    // System area: every system message (wherever it stands) joined with "\n\n", then tools.
    Builder system;
    bool first_system = true;
    for (const auto& m : messages) {
        if (m.role != Role::System) continue;
        if (!first_system) system.t("\n\n");
        system.u(m.content);
        first_system = false;
    }
    if (tools) {
        if (!system.p.text.empty()) system.t("\n\n");
        tools_block(system, options.tools_json);
    }
    if (!options.response_format_json.empty()) {
        const ojson schema = parse_json(options.response_format_json, "response_format");
        if (!system.p.text.empty()) system.t("\n\n");
        system.t("## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n");
        system.u(python_style(schema));
    }

    Builder out;
    out.t(kBos);
    if (!messages.empty() && mode == ThinkingMode::Max) out.t(kThinkMaxPrefix);
    out.append(system);

    const std::vector<const Message*> ordered = order_tool_results(messages);
    // Reasoning is kept after the last user-side message; tool results count as user-side.
    ptrdiff_t last_user = -1;
    bool has_tool_results = false;
    for (size_t i = 0; i < ordered.size(); ++i) {
        const Role r = ordered[i]->role;
        if (r == Role::User || r == Role::Developer || r == Role::Tool) last_user = ptrdiff_t(i);
        if (r == Role::Tool) has_tool_results = true;
    }

    bool in_user = false;
    for (size_t i = 0; i < ordered.size(); ++i) {
        const Message& m = *ordered[i];
        switch (m.role) {
            case Role::System: break;
            case Role::User:
            case Role::Developer:
            case Role::Tool:
                out.t(in_user ? std::string_view("\n\n") : kUser);
                in_user = true;
                if (m.role == Role::Tool) {
                    out.t("<tool_result>");
                    out.u(m.content);
                    out.t("</tool_result>");
                } else {
                    out.u(m.content);
                }
                break;
            case Role::Assistant: {
                in_user = false;
                out.t(kAssistant);
                const bool after_last_user = ptrdiff_t(i) > last_user;
                const bool keep = thinking && (!options.drop_thinking || tools || after_last_user ||
                                               has_tool_results);
                if (keep) {
                    out.t(kThinkStart);
                    out.u(m.reasoning);
                }
                out.t(kThinkEnd);
                out.u(m.content);
                std::optional<std::string> exact;
                if (!m.tool_calls.empty() && options.exact_tool_block) exact = options.exact_tool_block(m.tool_calls);
                if (exact) out.t(*exact);
                else tool_calls_block(out, m.tool_calls);
                out.t(kEos);
                break;
            }
        }
    }
    if (options.add_generation_prompt) {
        out.t(kAssistant);
        out.t(thinking ? kThinkStart : kThinkEnd);
    }
    return std::move(out.p);
}

std::string render(const std::vector<Message>& messages, const RenderOptions& options) {
    return render_prompt(messages, options).text;
}

}  // namespace ds4::chat
