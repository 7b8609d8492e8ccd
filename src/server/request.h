// The four HTTP APIs' request bodies turned into one internal request (spec/PRODUCT.md §4.3, §4.4):
// messages for the chat renderer, the tools array in OpenAI form, thinking mode, sampling,
// limits and streaming options. parse_request() is a pure function of the JSON text (no
// sockets, no model), so it can be fuzzed; bad input throws RequestError with the HTTP status
// and the message the client sees.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/message.h"
#include "chat/conversation.h"
#include "chat/format.h"
#include "common/error.h"
#include "sampling/sampler.h"

namespace ds4::server {

enum class Api { Chat, Completions, Messages, Responses };
const char* to_string(Api api);

// Limits on a request body's JSON (docs/SERVER.md "Limits"): nesting deeper than this is
// refused before parsing (deep nesting would exhaust the stack in recursive JSON code), and
// error messages quote at most kMaxEchoBytes of what the client sent.
inline constexpr size_t kMaxJsonDepth = 128;
inline constexpr size_t kMaxEchoBytes = 256;

// `text` cut to at most `limit` bytes (at a UTF-8 boundary) with "... (N bytes)" appended.
std::string cap_text(std::string_view text, size_t limit = kMaxEchoBytes);
// Whether no array or object in `json` nests deeper than `max_depth` (strings are skipped;
// the text need not be valid JSON).
bool json_depth_within(std::string_view json, size_t max_depth);

// The model ids GET /v1/models lists for the loaded family, and the aliases a request may name
// as well (thinking off / on unless a field says otherwise: DeepSeek's API names, and GLM's
// -chat / -nothink / -no-think / -reasoner forms, with or without the "zai/" prefix). A request
// may name any family's id (clients keep their configured name); any other "model" is a 404.
inline constexpr const char* kModelIds[] = {"deepseek-v4-flash", "deepseek-v4-pro"};
inline constexpr const char* kModelAliases[] = {"deepseek-chat", "deepseek-reasoner"};
inline constexpr const char* kGlmModelIds[] = {"glm-5.2", "zai/glm-5.2"};
inline constexpr const char* kGlmAliases[] = {"glm-5.2-chat",         "glm-5.2-nothink",     "glm-5.2-no-think",
                                              "glm-5.2-reasoner",     "zai/glm-5.2-chat",    "zai/glm-5.2-nothink",
                                              "zai/glm-5.2-no-think", "zai/glm-5.2-reasoner"};
bool known_model(std::string_view id);
// The ids GET /v1/models lists for a model of `architecture` (general.architecture).
std::vector<std::string> listed_models(std::string_view architecture);
// The thinking mode an alias implies (nullopt: the id implies none).
std::optional<chat::ThinkingMode> alias_thinking(std::string_view id);

// A client error: status (400 unless said otherwise) and message (client text in it is
// capped, see cap_text); `param` names the request field when one is to blame (OpenAI error
// shape).
class RequestError : public Error {
public:
    RequestError(int status, const std::string& message, std::string param = {},
                 std::string code = {})
        : Error(cap_text(message, 4 * kMaxEchoBytes)), status(status), param(std::move(param)),
          code(std::move(code)) {}
    int status;
    std::string param;
    std::string code;
};

// A tool as the client named it (Responses keeps wire names and namespaces for its output).
struct ToolName {
    std::string name;       // the name rendered into the prompt and parsed back
    std::string wire_name;  // the name reported to the client
    std::string ns;         // Responses namespace, if any
    bool custom = false;    // Responses freeform "custom" tool: rendered as a function with one
                            // string parameter "input", reported as a custom_tool_call
};

// tool_choice (spec/PRODUCT.md §4.3): Required and Named make the reply start with a DSML
// tool-call block (Named: with the invoke of `name`, the tool's rendered name).
struct ToolChoice {
    enum class Mode { Auto, None, Required, Named };
    Mode mode = Mode::Auto;
    std::string name;
    bool forced() const { return mode == Mode::Required || mode == Mode::Named; }
};

struct Request {
    Api api = Api::Chat;
    std::string model;
    std::vector<chat::Message> messages;
    std::string tools_json;        // OpenAI tools array ({type:function, function:{...}}); empty: none
    std::vector<ToolName> tools;   // the tools in tools_json, in order
    ToolChoice tool_choice;        // None has already dropped the tools
    std::string response_format_json;  // a JSON schema the answer must follow (prompted, not enforced)
    chat::ThinkingMode thinking = chat::ThinkingMode::High;
    sampling::SamplerParams sampling;  // what the client set, else V4's defaults (see below)
    bool seed_given = false;
    // Which of temperature, top_p, min_p the client set (explicit knobs apply in thinking mode
    // too); the rest take the model's chat format defaults (apply_sampling_defaults).
    struct {
        bool temperature = false, top_p = false, min_p = false;
    } sampling_given;
    std::optional<int64_t> max_tokens;  // the client's output limit
    std::vector<std::string> stop;      // stop sequences (non-empty strings)
    bool stream = false;
    bool include_usage = false;         // chat/completions: stream_options.include_usage
    bool reasoning_summary = false;     // responses: reasoning.summary opted in to reasoning events
    // messages: thinking.display "omitted": the model still thinks, but the thinking blocks are
    // sent empty (with their signature, so a client can hand them back) and never streamed.
    bool thinking_omitted = false;
    // chat: `logprobs: true` with `top_logprobs` alternatives (0-20); completions: `logprobs: N`
    // (0-20). -1: none asked. Reported for the answer's tokens, not the reasoning's.
    int logprobs = -1;
    // Who the conversation belongs to, for the logs and a load balancer's affinity (docs/
    // SERVER.md "Session affinity"): the X-DS4-Session header (set by the server), else the
    // body's OpenAI `user` / `prompt_cache_key` / `safety_identifier` or Anthropic
    // `metadata.user_id`. Never interpreted; printable ASCII only (others become '_'), at
    // most kMaxSessionBytes. Empty: none given.
    std::string session;
    const char* session_source = "";  // "header", "user", "prompt_cache_key", ...
    // responses: the stored response this one continues (server/continuation.h), and whether
    // this response may be stored for a later previous_response_id (`store`, default true).
    std::string previous_response_id;
    bool store = true;
};

inline constexpr size_t kMaxSessionBytes = 128;
// `v` as a session key: cut to kMaxSessionBytes, bytes outside printable ASCII (and spaces,
// quotes, backslashes, which would blur a log line) replaced by '_'.
std::string session_key(std::string_view v);

// Parses one request body for `api`. Throws RequestError (never anything else for any input):
// 400 for a malformed body, 404 for an unknown model.
Request parse_request(Api api, std::string_view body);

// Gives the sampling knobs the client did not set the format's defaults (spec/PRODUCT.md §9.1:
// GLM is served with top-p 0.95 and min-p 0; parse_request fills DeepSeek V4's).
void apply_sampling_defaults(Request& r, const chat::SamplingDefaults& defaults);

}  // namespace ds4::server
