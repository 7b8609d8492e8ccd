#include "server/request.h"

#include <span>

#include "server/request_fields.h"

namespace ds4::server {

using namespace detail;

const char* to_string(Api api) {
    switch (api) {
        case Api::Chat: return "chat";
        case Api::Completions: return "completions";
        case Api::Messages: return "messages";
        case Api::Responses: return "responses";
    }
    return "?";
}

std::string cap_text(std::string_view text, size_t limit) {
    if (text.size() <= limit) return std::string(text);
    size_t cut = limit;
    while (cut > 0 && (uint8_t(text[cut]) & 0xC0) == 0x80) --cut;  // not inside a UTF-8 sequence
    return fmt::format("{}... ({} bytes)", text.substr(0, cut), text.size());
}

bool json_depth_within(std::string_view json, size_t max_depth) {
    size_t depth = 0;
    bool in_string = false;
    for (size_t i = 0; i < json.size(); ++i) {
        const char c = json[i];
        if (in_string) {
            if (c == '\\') ++i;
            else if (c == '"') in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            if (++depth > max_depth) return false;
        } else if ((c == ']' || c == '}') && depth > 0) {
            --depth;
        }
    }
    return true;
}

bool known_model(std::string_view id) {
    for (const auto& list : {std::span<const char* const>(kModelIds), std::span<const char* const>(kModelAliases),
                             std::span<const char* const>(kGlmModelIds), std::span<const char* const>(kGlmAliases)})
        for (const char* m : list)
            if (id == m) return true;
    return false;
}

std::vector<std::string> listed_models(std::string_view architecture) {
    if (architecture == "glm-dsa") return {std::begin(kGlmModelIds), std::end(kGlmModelIds)};
    return {std::begin(kModelIds), std::end(kModelIds)};
}

std::optional<chat::ThinkingMode> alias_thinking(std::string_view id) {
    if (id == "deepseek-chat") return chat::ThinkingMode::Off;
    if (id == "deepseek-reasoner") return chat::ThinkingMode::High;
    if (id.starts_with("zai/")) id.remove_prefix(4);
    if (id == "glm-5.2-chat" || id == "glm-5.2-nothink" || id == "glm-5.2-no-think") return chat::ThinkingMode::Off;
    if (id == "glm-5.2-reasoner") return chat::ThinkingMode::High;
    return std::nullopt;
}

std::string session_key(std::string_view v) {
    std::string s(v.substr(0, kMaxSessionBytes));
    for (char& c : s)
        if (c <= ' ' || c > '~' || c == '"' || c == '\\') c = '_';
    return s;
}

namespace {

// The first session field the body has (see Request::session); a non-string one is ignored.
void session_fields(Request& r, const ojson& j) {
    if (j.contains("metadata") && j["metadata"].is_object()) {
        const ojson& m = j["metadata"];
        if (m.contains("user_id") && m["user_id"].is_string() && !m["user_id"].get_ref<const std::string&>().empty()) {
            r.session = session_key(m["user_id"].get_ref<const std::string&>());
            r.session_source = "metadata.user_id";
            return;
        }
    }
    for (const char* k : {"prompt_cache_key", "user", "safety_identifier"})
        if (j.contains(k) && j[k].is_string() && !j[k].get_ref<const std::string&>().empty()) {
            r.session = session_key(j[k].get_ref<const std::string&>());
            r.session_source = k;
            return;
        }
}

}  // namespace

Request parse_request(Api api, std::string_view body) {
    if (!json_depth_within(body, kMaxJsonDepth))
        bad(fmt::format("invalid JSON request: nested deeper than {} levels", kMaxJsonDepth));
    ojson j;
    try {
        j = ojson::parse(body);
    } catch (const nlohmann::json::exception& e) {
        bad(fmt::format("invalid JSON request: {}", e.what()));
    }
    if (!j.is_object()) bad("invalid JSON request: the body must be a JSON object");
    Request r;
    r.api = api;
    try {
        r.model = get_string(j, "model");
        if (!r.model.empty() && !known_model(r.model))
            throw RequestError(404, fmt::format("model '{}' not found (known: deepseek-v4-flash, "
                                                "deepseek-v4-pro, deepseek-chat, deepseek-reasoner, glm-5.2, "
                                                "glm-5.2-chat, glm-5.2-reasoner; zai/ prefix accepted)",
                                                cap_text(r.model, 64)),
                               "model", "model_not_found");
        thinking_controls(r, j);
        sampling_fields(r, j);
        session_fields(r, j);
        switch (api) {
            case Api::Chat: parse_chat(r, j); break;
            case Api::Completions: parse_completions(r, j); break;
            case Api::Messages: parse_messages(r, j); break;
            case Api::Responses: parse_responses(r, j); break;
        }
    } catch (const RequestError&) {
        throw;
    } catch (const nlohmann::json::exception& e) {
        bad(fmt::format("invalid JSON request: {}", e.what()));
    }
    return r;
}

void apply_sampling_defaults(Request& r, const chat::SamplingDefaults& defaults) {
    if (!r.sampling_given.temperature) r.sampling.temperature = defaults.temperature;
    if (!r.sampling_given.top_p) r.sampling.top_p = defaults.top_p;
    if (!r.sampling_given.min_p) r.sampling.min_p = defaults.min_p;
}

}  // namespace ds4::server
