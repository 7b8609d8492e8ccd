#include "server/request_fields.h"

namespace ds4::server::detail {

chat::Message message(chat::Role role, std::string content) {
    chat::Message m;
    m.role = role;
    m.content = std::move(content);
    return m;
}

[[noreturn]] void bad(const std::string& message, std::string param) {
    throw RequestError(400, message, std::move(param));
}

// Absent and null are the same thing to every API.
const ojson* field(const ojson& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || it->is_null()) return nullptr;
    return &*it;
}

std::string get_string(const ojson& obj, const char* key, const std::string& dflt) {
    const ojson* v = field(obj, key);
    if (!v) return dflt;
    if (!v->is_string()) bad(fmt::format("invalid JSON request: '{}' must be a string", key), key);
    return v->get<std::string>();
}

std::optional<bool> get_bool(const ojson& obj, const char* key) {
    const ojson* v = field(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_boolean()) bad(fmt::format("invalid JSON request: '{}' must be a boolean", key), key);
    return v->get<bool>();
}

std::optional<double> get_number(const ojson& obj, const char* key) {
    const ojson* v = field(obj, key);
    if (!v) return std::nullopt;
    if (!v->is_number()) bad(fmt::format("invalid JSON request: '{}' must be a number", key), key);
    return v->get<double>();
}

std::optional<int64_t> get_int(const ojson& obj, const char* key) {
    const ojson* v = field(obj, key);
    if (!v) return std::nullopt;
    if (v->is_number_unsigned()) {
        const uint64_t u = v->get<uint64_t>();
        return u > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(u);
    }
    if (!v->is_number_integer())
        bad(fmt::format("invalid JSON request: '{}' must be an integer", key), key);
    return v->get<int64_t>();
}

const ojson* get_array(const ojson& obj, const char* key) {
    const ojson* v = field(obj, key);
    if (v && !v->is_array()) bad(fmt::format("invalid JSON request: '{}' must be an array", key), key);
    return v;
}

const ojson* get_object(const ojson& obj, const char* key) {
    const ojson* v = field(obj, key);
    if (v && !v->is_object()) bad(fmt::format("invalid JSON request: '{}' must be an object", key), key);
    return v;
}

// Text of a content value: a string, or an array of strings and parts carrying "text"
// (OpenAI {type:text}, Responses input_text/output_text/..., Anthropic text blocks).
std::string content_text(const ojson& v, const char* what) {
    if (v.is_null()) return {};
    if (v.is_string()) return v.get<std::string>();
    if (!v.is_array()) bad(fmt::format("invalid JSON request: {} must be a string or an array", what));
    std::string out;
    for (const auto& part : v) {
        if (part.is_string()) {
            out += part.get<std::string>();
            continue;
        }
        if (!part.is_object()) bad(fmt::format("invalid JSON request: {} parts must be objects", what));
        const std::string type = get_string(part, "type");
        if (type.find("image") != std::string::npos || type.find("audio") != std::string::npos ||
            type == "input_file" || type == "document")
            bad(fmt::format("content part type '{}' is not supported (text only)", type));
        if (const ojson* t = field(part, "text")) {
            if (!t->is_string()) bad(fmt::format("invalid JSON request: {} text must be a string", what));
            out += t->get<std::string>();
        }
    }
    return out;
}

// Tool-call arguments arrive as a JSON string or as raw JSON.
std::string arguments_text(const ojson* v) {
    if (!v) return "{}";
    if (v->is_string()) return v->get<std::string>();
    return v->dump();
}

chat::Role role_of(const std::string& s) {
    try {
        const chat::Role r = chat::role_from_string(s);
        // Developer text belongs to the system area (spec/PRODUCT.md §4.3).
        return r == chat::Role::Developer ? chat::Role::System : r;
    } catch (const Error&) {
        bad(fmt::format("invalid JSON request: unknown message role '{}'", s), "messages");
    }
}

void add_function_tool(Request& r, ojson& out, const ojson& function, const std::string& ns) {
    if (!function.is_object()) bad("invalid JSON request: a tool's function must be an object", "tools");
    const std::string name = get_string(function, "name");
    if (name.empty()) bad("invalid JSON request: a tool needs a name", "tools");
    // The schema is rendered into the prompt as JSON: it has to be one (an object).
    if (const ojson* p = field(function, "parameters"); p && !p->is_object())
        bad(fmt::format("invalid JSON request: the parameters of tool '{}' must be a JSON schema object", name),
            "tools");
    if (const ojson* d = field(function, "description"); d && !d->is_string())
        bad(fmt::format("invalid JSON request: the description of tool '{}' must be a string", name), "tools");
    out.push_back(ojson{{"type", "function"}, {"function", function}});
    r.tools.push_back({name, name, ns});
}

namespace {

using Mode = ToolChoice::Mode;

// The tool a forced choice names: its rendered name; 400 when it is not in the request's tools.
std::string named_tool(const Request& r, const std::string& name) {
    if (name.empty()) bad("invalid JSON request: tool_choice names no tool", "tool_choice");
    for (const ToolName& t : r.tools)
        if (t.name == name || t.wire_name == name) return t.name;
    bad(fmt::format("tool_choice names tool '{}', which is not in tools", cap_text(name, 64)), "tool_choice");
}

// The choice as each API spells it (spec/PRODUCT.md §4.3). Chat keeps its old leniency
// (unknown values mean auto); Responses and Anthropic refuse what they cannot honour.
ToolChoice parse_choice(const Request& r, const ojson& c) {
    ToolChoice out;
    if (c.is_string()) {
        const std::string s = c.get<std::string>();
        if (s == "none") out.mode = Mode::None;
        else if (s == "required" || s == "any") out.mode = Mode::Required;
        else if (s != "auto" && r.api == Api::Responses)
            bad(fmt::format("tool_choice={} not supported", cap_text(s, 64)), "tool_choice");
        return out;
    }
    if (!c.is_object()) bad("invalid JSON request: 'tool_choice' must be a string or an object", "tool_choice");
    const std::string type = get_string(c, "type");
    if (r.api == Api::Messages) {
        if (type == "none") out.mode = Mode::None;
        else if (type == "any") out.mode = Mode::Required;
        else if (type == "tool") out = {Mode::Named, get_string(c, "name")};
        else if (type != "auto") bad(fmt::format("tool_choice type '{}' not supported", cap_text(type, 64)), "tool_choice");
        return out;
    }
    if (type == "none") {
        out.mode = Mode::None;
    } else if (type == "function" || type == "custom") {
        // Chat: {type:function, function:{name}} ({type:custom, custom:{name}}); Responses:
        // {type:function, name}.
        std::string name = get_string(c, "name");
        if (const ojson* f = get_object(c, type.c_str())) name = get_string(*f, "name", name);
        out = {Mode::Named, name};
    } else if (type == "allowed_tools") {
        // The allowed subset is not enforced; its mode is.
        const ojson* a = get_object(c, "allowed_tools");
        if (get_string(a ? *a : c, "mode") == "required") out.mode = Mode::Required;
    } else if (r.api == Api::Responses && type != "auto") {
        bad(fmt::format("tool_choice type '{}' not supported", cap_text(type, 64)), "tool_choice");
    }
    return out;
}

}  // namespace

void apply_tool_choice(Request& r, const ojson& j) {
    const ojson* c = field(j, "tool_choice");
    if (!c) return;
    r.tool_choice = parse_choice(r, *c);
    switch (r.tool_choice.mode) {
        case Mode::Auto: break;
        case Mode::None:
            r.tools_json.clear();
            r.tools.clear();
            break;
        case Mode::Required:
            if (r.tools.empty()) bad("tool_choice requires a tool call, but the request has no tools", "tool_choice");
            break;
        case Mode::Named: r.tool_choice.name = named_tool(r, r.tool_choice.name); break;
    }
}

// Thinking controls of §4.4. Returns true when an explicit field decided the mode. `minimal`
// is the least reasoning a client can ask for on the models that lack `none` (Codex's lowest
// model_reasoning_effort on GPT-5: "to minimize reasoning, choose minimal"); V4 has only on
// and off, so it means off (upstream thinks at high effort for it).
bool apply_effort(Request& r, const std::string& effort, const char* key) {
    if (effort == "none" || effort == "minimal") r.thinking = chat::ThinkingMode::Off;
    else if (effort == "max") r.thinking = chat::ThinkingMode::Max;
    else if (effort == "xhigh" || effort == "high" || effort == "medium" || effort == "low")
        r.thinking = chat::ThinkingMode::High;
    else
        bad(fmt::format("invalid JSON request: unknown {} '{}'", key, effort), key);
    return true;
}

void thinking_controls(Request& r, const ojson& j) {
    bool explicit_mode = false;
    if (const ojson* t = field(j, "thinking")) {
        if (t->is_boolean()) {
            r.thinking = t->get<bool>() ? chat::ThinkingMode::High : chat::ThinkingMode::Off;
        } else if (t->is_object()) {
            const std::string type = get_string(*t, "type", "enabled");
            if (type == "disabled") r.thinking = chat::ThinkingMode::Off;
            else if (type == "enabled" || type == "adaptive") r.thinking = chat::ThinkingMode::High;
            else bad(fmt::format("invalid JSON request: unknown thinking type '{}'", type), "thinking");
            const std::string display = get_string(*t, "display", "summarized");
            if (display != "summarized" && display != "omitted")
                bad(fmt::format("invalid JSON request: unknown thinking display '{}'", display), "thinking");
            r.thinking_omitted = display == "omitted";
        } else {
            bad("invalid JSON request: 'thinking' must be an object or a boolean", "thinking");
        }
        explicit_mode = true;
    }
    if (auto think = get_bool(j, "think")) {
        r.thinking = *think ? chat::ThinkingMode::High : chat::ThinkingMode::Off;
        explicit_mode = true;
    }
    if (const ojson* oc = get_object(j, "output_config"))
        if (field(*oc, "effort")) explicit_mode = apply_effort(r, get_string(*oc, "effort"), "effort");
    if (field(j, "reasoning_effort"))
        explicit_mode = apply_effort(r, get_string(j, "reasoning_effort"), "reasoning_effort");
    if (const ojson* re = get_object(j, "reasoning"))  // Responses
        if (field(*re, "effort")) explicit_mode = apply_effort(r, get_string(*re, "effort"), "effort");
    if (!explicit_mode)
        if (const auto mode = alias_thinking(r.model)) r.thinking = *mode;
}

void sampling_fields(Request& r, const ojson& j) {
    // The ranges are sampling's (sampler.h), shared with the CLI's flags.
    auto check = [](const char* why, const char* key) {
        if (why) bad(fmt::format("invalid JSON request: '{}' {}", key, why), key);
    };
    sampling::SamplerParams p;
    if (auto v = get_number(j, "temperature")) {
        check(sampling::temperature_error(*v), "temperature");
        p.temperature = float(*v);
    }
    if (auto v = get_number(j, "top_p")) {
        check(sampling::top_p_error(*v), "top_p");
        p.top_p = float(*v);
    }
    if (auto v = get_number(j, "min_p")) {
        check(sampling::min_p_error(*v), "min_p");
        p.min_p = float(*v);
    }
    if (auto v = get_int(j, "top_k")) {
        check(sampling::top_k_error(*v), "top_k");
        p.top_k = int(std::min<int64_t>(*v, INT32_MAX));
    }
    uint64_t seed = 0;
    if (const ojson* s = field(j, "seed")) {
        if (s->is_number_unsigned()) seed = s->get<uint64_t>();
        else if (s->is_number_integer()) seed = uint64_t(s->get<int64_t>());
        else bad("invalid JSON request: 'seed' must be an integer", "seed");
        r.seed_given = true;
    }
    r.sampling_given = {.temperature = bool(get_number(j, "temperature")), .top_p = bool(get_number(j, "top_p")),
                        .min_p = bool(get_number(j, "min_p"))};
    // Explicit knobs win in thinking mode too (upstream ignores them there, §4.4; issue 36:
    // a client that sets a temperature means it).
    p.seed = seed;
    r.sampling = p;
}

void max_tokens_field(Request& r, const ojson& j, std::initializer_list<const char*> keys) {
    for (const char* k : keys) {
        if (auto v = get_int(j, k)) {
            if (*v < 1) bad(fmt::format("invalid JSON request: '{}' must be >= 1", k), k);
            r.max_tokens = *v;
            return;
        }
    }
}

void stop_field(Request& r, const ojson& j, const char* key) {
    const ojson* s = field(j, key);
    if (!s) return;
    if (s->is_string()) {
        if (!s->get<std::string>().empty()) r.stop.push_back(s->get<std::string>());
        return;
    }
    if (!s->is_array()) bad(fmt::format("invalid JSON request: '{}' must be a string or an array", key), key);
    for (const auto& e : *s) {
        if (!e.is_string()) bad(fmt::format("invalid JSON request: '{}' entries must be strings", key), key);
        if (!e.get<std::string>().empty()) r.stop.push_back(e.get<std::string>());
    }
}

// OpenAI allows 20 alternatives on chat (5 on legacy completions; ours take 20 on both).
constexpr int64_t kMaxTopLogprobs = 20;

void chat_logprobs(Request& r, const ojson& j) {
    const bool on = get_bool(j, "logprobs").value_or(false);
    const std::optional<int64_t> top = get_int(j, "top_logprobs");
    if (top && (*top < 0 || *top > kMaxTopLogprobs))
        bad(fmt::format("invalid JSON request: 'top_logprobs' must be in [0, {}]", kMaxTopLogprobs), "top_logprobs");
    if (top && !on) bad("invalid JSON request: 'top_logprobs' needs 'logprobs': true", "top_logprobs");
    if (on) r.logprobs = int(top.value_or(0));
}

void completion_logprobs(Request& r, const ojson& j) {
    const std::optional<int64_t> n = get_int(j, "logprobs");
    if (!n) return;
    if (*n < 0 || *n > kMaxTopLogprobs)
        bad(fmt::format("invalid JSON request: 'logprobs' must be an integer in [0, {}]", kMaxTopLogprobs), "logprobs");
    r.logprobs = int(*n);
}

void stream_fields(Request& r, const ojson& j) {
    r.stream = get_bool(j, "stream").value_or(false);
    if (const ojson* so = get_object(j, "stream_options"))
        r.include_usage = get_bool(*so, "include_usage").value_or(false);
}

// A json_schema format becomes the prompt's "## Response Format" section; json_object and
// text need no section. Decoding is not constrained (no grammar engine).
void response_format(Request& r, const ojson* format, const ojson* schema_holder, const char* key) {
    if (!format) return;
    if (!format->is_object()) bad(fmt::format("invalid JSON request: '{}' must be an object", key), key);
    const std::string type = get_string(*format, "type", "text");
    if (type == "text" || type == "json_object") return;
    if (type != "json_schema") bad(fmt::format("{} type '{}' is not supported", key, type), key);
    const ojson* schema = schema_holder ? field(*schema_holder, "schema") : nullptr;
    if (!schema || !schema->is_object())
        bad(fmt::format("invalid JSON request: {} json_schema needs a schema object", key), key);
    r.response_format_json = schema->dump();
}

}  // namespace ds4::server::detail
