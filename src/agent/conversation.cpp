#include "agent/conversation.h"

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace ds4::agent {

Conversation::Conversation(const chat::ChatFormat& format, std::string system, ConversationOptions options)
    : format_(&format), system_(std::move(system)), options_(std::move(options)) {
    if (!system_.empty()) messages_.push_back({.role = chat::Role::System, .content = system_});
}

void Conversation::seed(const std::vector<chat::Message>& history) {
    if (!tokens_.empty()) fail("a conversation is seeded before its first message");
    messages_.insert(messages_.end(), history.begin(), history.end());
}

chat::RenderedPrompt Conversation::render(bool generation_prompt) const {
    chat::RenderOptions o;
    o.thinking = options_.thinking;
    o.context_size = options_.context_size;
    o.tools_json = options_.tools_json;
    o.add_generation_prompt = generation_prompt;
    // Reasoning stays in every turn, so that adding a message never changes how the earlier
    // ones render (the difference below must be a pure suffix).
    o.drop_thinking = false;
    return format_->render(messages_, o);
}

void Conversation::add(const std::vector<chat::Message>& messages) {
    if (awaiting_reply_) add_reply({}, {});
    const bool first = tokens_.empty();
    const chat::RenderedPrompt before = first ? chat::RenderedPrompt{} : render(false);
    const auto saved = messages_;
    messages_.insert(messages_.end(), messages.begin(), messages.end());
    chat::RenderedPrompt after;
    try {
        after = render(true);
    } catch (...) {
        messages_ = saved;
        throw;
    }
    if (first || after.text.compare(0, before.text.size(), before.text) != 0) {
        // No common rendering to extend (the first turn): the whole prompt. The engine still
        // reuses whatever prefix it holds.
        tokens_ = format_->tokenize(after);
        awaiting_reply_ = true;
        return;
    }
    chat::RenderedPrompt suffix;
    suffix.text = after.text.substr(before.text.size());
    for (const chat::TextSpan& s : after.untrusted) {
        if (s.offset + s.length <= before.text.size()) continue;
        const size_t from = std::max(s.offset, before.text.size());
        suffix.untrusted.push_back({from - before.text.size(), s.offset + s.length - from});
    }
    // The reply's end marker (V4: EOS) was never emitted: the rendering closes the turn with
    // it, so it goes in before the suffix.
    const tokenizer::Tokenizer& tok = format_->tokenizer();
    const int32_t eos = format_->markers().eos;
    if (eos >= 0) {
        const std::string& eos_text = tok.token_text(eos);
        if (!eos_text.empty() && before.text.size() >= eos_text.size() &&
            before.text.compare(before.text.size() - eos_text.size(), eos_text.size(), eos_text) == 0 &&
            (tokens_.empty() || tokens_.back() != eos))
            tokens_.push_back(eos);
    }
    const std::vector<int32_t> ids = format_->tokenize(suffix);
    tokens_.insert(tokens_.end(), ids.begin(), ids.end());
    awaiting_reply_ = true;
}

std::vector<chat::ToolCall> Conversation::add_reply(const std::vector<int32_t>& ids, const chat::ParsedOutput& p) {
    chat::Message m{.role = chat::Role::Assistant, .content = p.content, .reasoning = p.reasoning};
    for (const auto& c : p.tool_calls)
        m.tool_calls.push_back({.id = "call_" + std::to_string(next_call_++), .name = c.name, .arguments = c.arguments});
    messages_.push_back(m);
    tokens_.insert(tokens_.end(), ids.begin(), ids.end());
    awaiting_reply_ = false;
    return m.tool_calls;
}

void Conversation::restore(std::vector<chat::Message> messages, std::vector<int32_t> tokens) {
    messages_ = std::move(messages);
    tokens_ = std::move(tokens);
    if (!messages_.empty() && messages_.front().role == chat::Role::System) system_ = messages_.front().content;
    next_call_ = 1;
    for (const auto& m : messages_) next_call_ += int(m.tool_calls.size());
    awaiting_reply_ = !messages_.empty() && messages_.back().role != chat::Role::Assistant &&
                      messages_.back().role != chat::Role::System;
}

void Conversation::rebuild(std::string system, std::vector<chat::Message> tail) {
    system_ = std::move(system);
    messages_.clear();
    if (!system_.empty()) messages_.push_back({.role = chat::Role::System, .content = system_});
    messages_.insert(messages_.end(), tail.begin(), tail.end());
    awaiting_reply_ = !tail.empty() && tail.back().role != chat::Role::Assistant;
    tokens_ = tail.empty() ? std::vector<int32_t>{} : format_->tokenize(render(awaiting_reply_));
}

}  // namespace ds4::agent
