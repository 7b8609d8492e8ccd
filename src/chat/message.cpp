#include "chat/message.h"

#include "common/error.h"

namespace ds4::chat {

Role role_from_string(std::string_view s) {
    if (s == "system") return Role::System;
    if (s == "developer") return Role::Developer;
    if (s == "user") return Role::User;
    if (s == "assistant") return Role::Assistant;
    if (s == "tool" || s == "function") return Role::Tool;
    fail("chat: unknown message role '{}' (expected system, developer, user, assistant or tool)", s);
}

}  // namespace ds4::chat
