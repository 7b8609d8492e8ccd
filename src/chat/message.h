// One chat message, as the renderer and the server see it (OpenAI-style fields).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace ds4::chat {

enum class Role { System, Developer, User, Assistant, Tool };

// "system", "developer", "user", "assistant", "tool" (also "function", an old alias of tool).
// Throws ds4::Error on anything else.
Role role_from_string(std::string_view s);

struct ToolCall {
    std::string id;         // matched against Message::tool_call_id of the results
    std::string name;
    std::string arguments;  // JSON text of an object (as sent by clients, or as parsed)
};

struct Message {
    Role role = Role::User;
    // {} initializers: {.role = ..., .content = ...} leaves the rest empty without a
    // -Wmissing-field-initializers warning.
    std::string content{};
    std::string reasoning{};            // assistant: reasoning_content
    std::vector<ToolCall> tool_calls{}; // assistant
    std::string tool_call_id{};         // tool: which call this result answers
    std::string name{};                 // tool: the function name (informational)
};

}  // namespace ds4::chat
