// Internal to the request parsers (request*.cpp): typed access to JSON request fields, each
// failing with RequestError 400 naming the field, and the field groups several APIs share.
// Absent and null fields are the same thing to every API.
#pragma once

#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "server/request.h"

namespace ds4::server::detail {

using ojson = nlohmann::ordered_json;

chat::Message message(chat::Role role, std::string content = {});
[[noreturn]] void bad(const std::string& message, std::string param = {});

// Typed getters: nullopt / nullptr / dflt when absent or null; RequestError on a wrong type.
const ojson* field(const ojson& obj, const char* key);
std::string get_string(const ojson& obj, const char* key, const std::string& dflt = {});
std::optional<bool> get_bool(const ojson& obj, const char* key);
std::optional<double> get_number(const ojson& obj, const char* key);
std::optional<int64_t> get_int(const ojson& obj, const char* key);
const ojson* get_array(const ojson& obj, const char* key);
const ojson* get_object(const ojson& obj, const char* key);

// Text of a content value: a string, or an array of strings and parts carrying "text".
std::string content_text(const ojson& v, const char* what);
// Tool-call arguments arrive as a JSON string or as raw JSON.
std::string arguments_text(const ojson* v);
// A message role; developer text belongs to the system area (spec/PRODUCT.md §4.3).
chat::Role role_of(const std::string& s);
// Appends {type:function, function} to `out` and the name to r.tools.
void add_function_tool(Request& r, ojson& out, const ojson& function, const std::string& ns = {});
// tool_choice of every API (after the tools): "none" (Anthropic {type:none}) drops the tools;
// "required" / a named function (Anthropic any / tool) sets r.tool_choice, 400 when there
// are no tools or the name is not one of them.
void apply_tool_choice(Request& r, const ojson& j);

// Field groups (§4.3, §4.4).
void thinking_controls(Request& r, const ojson& j);
void sampling_fields(Request& r, const ojson& j);  // after thinking_controls
void max_tokens_field(Request& r, const ojson& j, std::initializer_list<const char*> keys);
void stop_field(Request& r, const ojson& j, const char* key);
void stream_fields(Request& r, const ojson& j);
// logprobs: chat's `logprobs` (bool) + `top_logprobs` (0-20); completions' `logprobs` (0-20).
void chat_logprobs(Request& r, const ojson& j);
void completion_logprobs(Request& r, const ojson& j);
void response_format(Request& r, const ojson* format, const ojson* schema_holder, const char* key);

// The per-API parsers.
void parse_chat(Request& r, const ojson& j);
void parse_completions(Request& r, const ojson& j);
void parse_messages(Request& r, const ojson& j);
void parse_responses(Request& r, const ojson& j);

}  // namespace ds4::server::detail
