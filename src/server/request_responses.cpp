// OpenAI Responses request bodies (spec/PRODUCT.md §4.3).
#include "server/request_fields.h"

namespace ds4::server::detail {

void parse_responses(Request& r, const ojson& j) {
    if (field(j, "conversation")) bad("conversation is not supported; use previous_response_id or replay the full input", "conversation");
    r.previous_response_id = get_string(j, "previous_response_id");
    r.store = get_bool(j, "store").value_or(true);
    const std::string instructions = get_string(j, "instructions");
    if (!instructions.empty()) r.messages.push_back(message(chat::Role::System, instructions));
    const ojson* input = field(j, "input");
    if (!input) bad("missing input", "input");
    if (input->is_string()) {
        r.messages.push_back(message(chat::Role::User, input->get<std::string>()));
    } else if (input->is_array()) {
        std::string pending_reasoning;
        auto assistant = [&]() -> chat::Message& {
            if (r.messages.empty() || r.messages.back().role != chat::Role::Assistant) {
                r.messages.push_back(message(chat::Role::Assistant));
                r.messages.back().reasoning = std::move(pending_reasoning);
                pending_reasoning.clear();
            }
            return r.messages.back();
        };
        for (const auto& item : *input) {
            if (!item.is_object()) bad("invalid JSON request: input items must be objects", "input");
            const std::string status = get_string(item, "status", "completed");
            if (status != "completed")
                bad(fmt::format("input item status '{}' is not supported; replay completed items", status), "input");
            const std::string type = get_string(item, "type", field(item, "role") ? "message" : "");
            if (type == "message") {
                const chat::Role role = role_of(get_string(item, "role", "user"));
                std::string text;
                if (const ojson* c = field(item, "content")) text = content_text(*c, "content");
                if (role == chat::Role::Assistant) {
                    chat::Message& a = assistant();
                    a.content += text;
                } else {
                    r.messages.push_back(message(role, std::move(text)));
                }
            } else if (type == "reasoning") {
                std::string text;
                for (const char* k : {"summary", "content"})
                    if (const ojson* s = field(item, k)) text += content_text(*s, k);
                pending_reasoning += text;
            } else if (type == "function_call" || type == "custom_tool_call") {
                const std::string args = type == "function_call"
                                             ? arguments_text(field(item, "arguments"))
                                             : ojson{{"input", get_string(item, "input")}}.dump();
                chat::Message& a = assistant();
                a.tool_calls.push_back({get_string(item, "call_id"), get_string(item, "name"), args});
            } else if (type == "function_call_output" || type == "custom_tool_call_output") {
                chat::Message res = message(chat::Role::Tool);
                res.tool_call_id = get_string(item, "call_id");
                if (const ojson* o = field(item, "output"))
                    res.content = o->is_string() || o->is_array() ? content_text(*o, "output") : o->dump();
                r.messages.push_back(std::move(res));
            } else if (type.empty()) {
                bad("invalid JSON request: an input item needs a type", "input");
            }
            // Hosted-tool calls and compaction items are bookkeeping: nothing to render.
        }
    } else {
        bad("invalid JSON request: 'input' must be a string or an array", "input");
    }
    if (r.messages.empty() || (r.messages.size() == 1 && r.messages[0].role == chat::Role::System))
        bad("missing input", "input");
    if (const ojson* tools = get_array(j, "tools")) {
        ojson out = ojson::array();
        for (const auto& t : *tools) {
            if (!t.is_object()) bad("invalid JSON request: each tool must be an object", "tools");
            const std::string type = get_string(t, "type", "function");
            if (type == "function") {
                ojson f = t;
                f.erase("type");
                f.erase("strict");
                add_function_tool(r, out, f);
            } else if (type == "custom") {
                // Freeform tools (Codex's apply_patch): the model writes the raw text as the one
                // string parameter "input".
                ojson f{{"name", get_string(t, "name")}};
                if (field(t, "description")) f["description"] = get_string(t, "description");
                f["parameters"] = {{"type", "object"},
                                   {"properties", {{"input", {{"type", "string"}}}}},
                                   {"required", {"input"}}};
                add_function_tool(r, out, f);
                r.tools.back().custom = true;
            } else if (type == "namespace") {
                const std::string ns = get_string(t, "name");
                if (const ojson* inner = get_array(t, "tools"))
                    for (const auto& it : *inner) {
                        if (!it.is_object()) bad("invalid JSON request: each tool must be an object", "tools");
                        ojson f = it;
                        f.erase("type");
                        f.erase("strict");
                        add_function_tool(r, out, f, ns);
                    }
            }
        }
        if (!out.empty()) r.tools_json = out.dump();
    }
    apply_tool_choice(r, j);
    if (const ojson* text = get_object(j, "text"))
        if (const ojson* f = field(*text, "format")) response_format(r, f, f, "text.format");
    max_tokens_field(r, j, {"max_output_tokens", "max_tokens"});
    r.stream = get_bool(j, "stream").value_or(false);
    if (const ojson* re = get_object(j, "reasoning")) {
        const std::string s = get_string(*re, "summary");
        r.reasoning_summary = s == "auto" || s == "concise" || s == "detailed";
    }
}

}  // namespace ds4::server::detail
