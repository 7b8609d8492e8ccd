// The agent's conversation: the messages (what the user sees and a session stores) and the
// exact token sequence the model holds. The tokens are the truth: the model's replies go in as
// sampled, never re-rendered, so the live KV state always matches them (no mismatch can come
// from rendering a reply differently from how it was sampled). What follows a reply (tool
// results, the next user message) is rendered by the model's chat format (chat/format.h,
// DSML for DeepSeek V4, GLM's <tool_call> syntax for GLM 5.2) as the difference between the
// conversation rendered without and with the new messages, so each format decides its own
// separators, markers and end-of-turn token.
//
//   Conversation c(format, system, {.tools_json = Tools::specs_json()});
//   c.add({{.role = User, .content = "hi"}});     // tokens(): the prompt to sync
//   ... generate ... c.add_reply(emitted, parsed); // tool calls get ids
//   c.add(tool_results);                           // and generate again
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/format.h"

namespace ds4::agent {

struct ConversationOptions {
    std::string tools_json;  // the tools rendered in the system prompt ("" : none)
    chat::ThinkingMode thinking = chat::ThinkingMode::High;
    int64_t context_size = 0;
};

class Conversation {
public:
    Conversation(const chat::ChatFormat& format, std::string system, ConversationOptions options);

    // Appends user or tool messages and the generation prompt after them. When the last
    // generation prompt got no reply (stopped by Ctrl+C), an empty reply closes it first.
    // Throws ds4::Error when the format cannot render them (nothing changes then).
    void add(const std::vector<chat::Message>& messages);
    // Before the first add(): a history to start from (--prefix-file's turns), rendered with it.
    void seed(const std::vector<chat::Message>& history);
    // Appends the reply the model just gave: its sampled ids and the parse of their text;
    // the tool calls get ids ("call_<n>") and are returned.
    std::vector<chat::ToolCall> add_reply(const std::vector<int32_t>& ids, const chat::ParsedOutput& parsed);

    const std::vector<chat::Message>& messages() const { return messages_; }
    const std::vector<int32_t>& tokens() const { return tokens_; }
    const std::string& system() const { return system_; }
    bool empty() const { return tokens_.empty(); }
    void set_thinking(chat::ThinkingMode m) { options_.thinking = m; }
    chat::ThinkingMode thinking() const { return options_.thinking; }
    // A saved conversation back (agent/sessions.h); the tokens must be those the messages led to.
    void restore(std::vector<chat::Message> messages, std::vector<int32_t> tokens);
    // Compaction (agent/agent.h): a new system prompt and the kept messages (none, or from a
    // user message on), rendered afresh; ends with the generation prompt when the last kept
    // message is not a reply.
    void rebuild(std::string system, std::vector<chat::Message> tail);

private:
    chat::RenderedPrompt render(bool generation_prompt) const;

    const chat::ChatFormat* format_;
    std::string system_;
    ConversationOptions options_;
    std::vector<chat::Message> messages_;  // the system message first, when there is one
    std::vector<int32_t> tokens_;
    int next_call_ = 1;
    bool awaiting_reply_ = false;  // tokens_ end with a generation prompt
};

}  // namespace ds4::agent
