// Test helper: turns a conversation case of tests/data/chat/conversations.json (OpenAI-style
// JSON, the same input tests/oracle/js/chat_render.js renders) into our Message list and options.
#pragma once

#include "chat/render.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ds4::chat::test {

using ojson = nlohmann::ordered_json;

inline std::string read_text(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

inline std::string str_or_empty(const ojson& o, const char* key) {
    return o.contains(key) && o.at(key).is_string() ? o.at(key).get<std::string>() : std::string();
}

inline std::vector<Message> messages_from_case(const ojson& c) {
    std::vector<Message> out;
    for (const auto& m : c.at("messages")) {
        Message msg;
        msg.role = role_from_string(m.at("role").get<std::string>());
        msg.content = str_or_empty(m, "content");
        msg.reasoning = str_or_empty(m, "reasoning_content");
        msg.tool_call_id = str_or_empty(m, "tool_call_id");
        if (m.contains("tool_calls")) {
            for (const auto& tc : m.at("tool_calls")) {
                const auto& fn = tc.at("function");
                msg.tool_calls.push_back({str_or_empty(tc, "id"), fn.at("name").get<std::string>(),
                                          fn.at("arguments").is_string() ? fn.at("arguments").get<std::string>()
                                                                         : fn.at("arguments").dump()});
            }
        }
        out.push_back(std::move(msg));
    }
    return out;
}

inline RenderOptions options_from_case(const ojson& c) {
    RenderOptions o;
    const std::string t = c.value("thinking", std::string("high"));
    o.thinking = t == "off" ? ThinkingMode::Off : t == "max" ? ThinkingMode::Max : ThinkingMode::High;
    o.context_size = c.value("context", int64_t{0});
    o.add_generation_prompt = c.value("add_generation_prompt", true);
    o.drop_thinking = c.value("drop_thinking", true);
    if (c.contains("tools")) o.tools_json = c.at("tools").dump();
    if (c.contains("response_format")) o.response_format_json = c.at("response_format").dump();
    return o;
}

}  // namespace ds4::chat::test
