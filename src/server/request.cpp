#include "server/request.h"

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

Request parse_request(Api api, std::string_view body) {
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
        thinking_controls(r, j);
        sampling_fields(r, j);
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

}  // namespace ds4::server
