// OpenAI Chat Completions and legacy Completions request bodies (spec/PRODUCT.md §4.3).
#include "server/request_fields.h"

namespace ds4::server::detail {
namespace {

// OpenAI chat tools: {type:function, function:{...}} or a bare schema object.
void chat_tools(Request& r, const ojson& j) {
    const ojson* tools = get_array(j, "tools");
    if (!tools) return;
    ojson out = ojson::array();
    for (const auto& t : *tools) {
        if (!t.is_object()) bad("invalid JSON request: each tool must be an object", "tools");
        if (const ojson* f = field(t, "function")) add_function_tool(r, out, *f);
        else if (!t.contains("type") || t.at("type") == "function") add_function_tool(r, out, t);
    }
    if (!out.empty()) r.tools_json = out.dump();
}

}  // namespace

// Chat Completions.
void parse_chat(Request& r, const ojson& j) {
    const ojson* msgs = get_array(j, "messages");
    if (!msgs || msgs->empty()) bad("missing messages", "messages");
    for (const auto& m : *msgs) {
        if (!m.is_object()) bad("invalid JSON request: each message must be an object", "messages");
        chat::Message msg;
        msg.role = role_of(get_string(m, "role", "user"));
        if (const ojson* c = field(m, "content")) msg.content = content_text(*c, "content");
        msg.reasoning = get_string(m, "reasoning_content");
        msg.tool_call_id = get_string(m, "tool_call_id");
        msg.name = get_string(m, "name");
        if (const ojson* calls = get_array(m, "tool_calls")) {
            for (const auto& c : *calls) {
                if (!c.is_object()) bad("invalid JSON request: each tool call must be an object", "messages");
                const ojson* f = get_object(c, "function");
                if (!f) bad("invalid JSON request: a tool call needs a function", "messages");
                msg.tool_calls.push_back(
                    {get_string(c, "id"), get_string(*f, "name"), arguments_text(field(*f, "arguments"))});
            }
        }
        r.messages.push_back(std::move(msg));
    }
    chat_tools(r, j);
    apply_tool_choice(r, j);
    if (auto n = get_int(j, "n"); n && *n != 1) bad("n other than 1 is not supported", "n");
    chat_logprobs(r, j);
    if (const ojson* rf = field(j, "response_format"))
        response_format(r, rf, rf->is_object() ? get_object(*rf, "json_schema") : nullptr, "response_format");
    max_tokens_field(r, j, {"max_completion_tokens", "max_tokens"});
    stop_field(r, j, "stop");
    stream_fields(r, j);
}

// Legacy completions: the prompt becomes one user message.
void parse_completions(Request& r, const ojson& j) {
    const ojson* p = field(j, "prompt");
    std::string prompt;
    if (p && p->is_string()) {
        prompt = p->get<std::string>();
    } else if (p && p->is_array() && !p->empty() && p->at(0).is_string()) {
        prompt = p->at(0).get<std::string>();
    } else if (p) {
        bad("invalid JSON request: 'prompt' must be a string or an array of strings", "prompt");
    } else {
        bad("missing prompt", "prompt");
    }
    r.messages.push_back(message(chat::Role::User, prompt));
    completion_logprobs(r, j);
    max_tokens_field(r, j, {"max_tokens"});
    stop_field(r, j, "stop");
    stream_fields(r, j);
}

}  // namespace ds4::server::detail
