// Anthropic Messages request bodies (spec/PRODUCT.md §4.3).
#include "server/request_fields.h"

namespace ds4::server::detail {
namespace {

std::string anthropic_system(const ojson& s) {
    if (s.is_string()) return s.get<std::string>();
    if (!s.is_array()) bad("invalid JSON request: 'system' must be a string or an array", "system");
    std::string out;
    for (const auto& b : s) {
        if (!b.is_object()) bad("invalid JSON request: system blocks must be objects", "system");
        const std::string text = get_string(b, "text");
        // Client bookkeeping such as Claude Code's billing header is not prompt text.
        if (text.rfind("x-anthropic-", 0) == 0) continue;
        if (!out.empty() && !text.empty()) out += "\n\n";
        out += text;
    }
    return out;
}

}  // namespace

void parse_messages(Request& r, const ojson& j) {
    if (const ojson* s = field(j, "system")) {
        std::string sys = anthropic_system(*s);
        if (!sys.empty()) r.messages.push_back(message(chat::Role::System, std::move(sys)));
    }
    const ojson* msgs = get_array(j, "messages");
    if (!msgs || msgs->empty()) bad("missing messages", "messages");
    for (const auto& m : *msgs) {
        if (!m.is_object()) bad("invalid JSON request: each message must be an object", "messages");
        const chat::Role role = role_of(get_string(m, "role", "user"));
        const ojson* c = field(m, "content");
        chat::Message msg = message(role);
        if (!c || c->is_string()) {
            if (c) msg.content = c->get<std::string>();
            r.messages.push_back(std::move(msg));
            continue;
        }
        if (!c->is_array()) bad("invalid JSON request: 'content' must be a string or an array", "messages");
        auto flush = [&] {
            if (!msg.content.empty() || !msg.reasoning.empty() || !msg.tool_calls.empty())
                r.messages.push_back(std::move(msg));
            msg = message(role);
        };
        for (const auto& b : *c) {
            if (!b.is_object()) bad("invalid JSON request: content blocks must be objects", "messages");
            const std::string type = get_string(b, "type");
            if (type == "text") {
                msg.content += get_string(b, "text");
            } else if (type == "thinking") {
                msg.reasoning += get_string(b, "thinking");
            } else if (type == "tool_use") {
                msg.tool_calls.push_back({get_string(b, "id"), get_string(b, "name"),
                                          arguments_text(field(b, "input"))});
            } else if (type == "tool_result") {
                flush();
                chat::Message res = message(chat::Role::Tool);
                res.tool_call_id = get_string(b, "tool_use_id");
                if (const ojson* rc = field(b, "content")) res.content = content_text(*rc, "tool_result content");
                r.messages.push_back(std::move(res));
            } else if (type == "image" || type == "document") {
                bad(fmt::format("content block type '{}' is not supported (text only)", type), "messages");
            }
            // redacted_thinking, server tool blocks and unknown types carry no prompt text.
        }
        flush();
    }
    if (const ojson* tools = get_array(j, "tools")) {
        ojson out = ojson::array();
        for (const auto& t : *tools) {
            if (!t.is_object()) bad("invalid JSON request: each tool must be an object", "tools");
            // Server tools (web_search_..., bash_...) have a type and no input_schema.
            if (!field(t, "input_schema")) continue;
            ojson f{{"name", get_string(t, "name")}};
            if (field(t, "description")) f["description"] = get_string(t, "description");
            f["parameters"] = t.at("input_schema");
            add_function_tool(r, out, f);
        }
        if (!out.empty()) r.tools_json = out.dump();
    }
    apply_tool_choice(r, j);
    max_tokens_field(r, j, {"max_tokens"});
    stop_field(r, j, "stop_sequences");
    r.stream = get_bool(j, "stream").value_or(false);
}

}  // namespace ds4::server::detail
