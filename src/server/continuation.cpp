#include "server/continuation.h"

#include <set>

#include <fmt/format.h>

#include "server/kv_policy.h"

namespace ds4::server {
namespace {

// `base`'s conversation, then the request's: system messages from the request replace the
// turn's when it has any (`keep_system`: else the turn's stay).
void prepend(Request& r, const StoredTurn& base, bool keep_system) {
    bool request_system = false;
    for (const auto& m : r.messages) request_system = request_system || m.role == chat::Role::System;
    std::vector<chat::Message> out;
    for (const auto& m : r.messages)
        if (m.role == chat::Role::System) out.push_back(m);
    for (const auto& m : base.messages)
        if (m.role != chat::Role::System || (keep_system && !request_system)) out.push_back(m);
    for (auto& m : r.messages)
        if (m.role != chat::Role::System) out.push_back(std::move(m));
    // System messages first either way: the renderer gathers them wherever they stand.
    r.messages = std::move(out);
}

// The ids of tool results whose call is not in the conversation.
std::vector<std::string> unanswered_results(const Request& r) {
    std::set<std::string> calls;
    for (const auto& m : r.messages)
        for (const auto& c : m.tool_calls) calls.insert(c.id);
    std::vector<std::string> out;
    for (const auto& m : r.messages)
        if (m.role == chat::Role::Tool && !calls.count(m.tool_call_id)) out.push_back(m.tool_call_id);
    return out;
}

[[noreturn]] void unknown_call(const Request& r, const std::string& id) {
    if (r.api == Api::Messages)
        throw RequestError(400, fmt::format("continuation state is not available for tool_use_id '{}': this server "
                                            "did not issue it or no longer remembers it (--response-store); retry "
                                            "by replaying the full Messages history (each tool_result after its "
                                            "tool_use block)", id),
                           "messages");
    throw RequestError(400, fmt::format("No tool call found for function call output: continuation state is not "
                                        "available for call_id '{}' (this server did not issue it or no longer "
                                        "remembers it, see --response-store); retry by replaying the full Responses "
                                        "history", id),
                       "input");
}

}  // namespace

std::shared_ptr<const StoredTurn> expand_continuation(Request& r, ResponseStore* store) {
    if (r.api != Api::Responses && r.api != Api::Messages) return nullptr;
    std::shared_ptr<const StoredTurn> base;
    if (!r.previous_response_id.empty()) {
        if (store) base = store->get("resp:" + r.previous_response_id);
        if (!base)
            throw RequestError(400, fmt::format("Previous response with id '{}' not found.", r.previous_response_id),
                               "previous_response_id", "previous_response_not_found");
        prepend(r, *base, false);  // OpenAI: instructions are not carried over
    }
    const std::vector<std::string> open = unanswered_results(r);
    if (open.empty()) return base;
    std::shared_ptr<const StoredTurn> turn;
    for (const auto& id : open) {
        auto t = store && !id.empty() ? store->get("call:" + id) : nullptr;
        if (!t) unknown_call(r, id);
        if (turn && t != turn)
            throw RequestError(400, "tool results of different replies cannot continue one conversation; replay the "
                                    "full history",
                               r.api == Api::Messages ? "messages" : "input");
        turn = std::move(t);
    }
    // A call of the previous response is in the conversation already; this is another reply.
    if (base)
        throw RequestError(400, "tool results answer calls that are not in previous_response_id's conversation",
                           "input");
    prepend(r, *turn, true);
    return turn;
}

std::vector<int32_t> continue_tokens(const chat::ChatFormat& format, const chat::RenderedPrompt& prompt,
                                     const StoredTurn* turn) {
    if (!turn || turn->tokens.empty() || prompt.text.size() <= turn->text.size() ||
        prompt.text.compare(0, turn->text.size(), turn->text) != 0)
        return format.tokenize(prompt);
    std::vector<int32_t> out = turn->tokens;
    const auto rest = format.tokenize(rendered_suffix(prompt, turn->text.size()));
    out.insert(out.end(), rest.begin(), rest.end());
    return out;
}

std::shared_ptr<StoredTurn> finished_turn(const Request& r, const chat::ParsedOutput& reply,
                                          const std::vector<std::string>& call_ids, std::vector<int32_t> tokens,
                                          std::string text) {
    auto t = std::make_shared<StoredTurn>();
    t->messages = r.messages;
    chat::Message a{.role = chat::Role::Assistant, .content = reply.content, .reasoning = reply.reasoning};
    for (size_t i = 0; i < reply.tool_calls.size(); ++i)
        a.tool_calls.push_back({i < call_ids.size() ? call_ids[i] : std::string(), reply.tool_calls[i].name,
                                reply.tool_calls[i].arguments});
    t->messages.push_back(std::move(a));
    t->tokens = std::move(tokens);
    t->text = std::move(text);
    return t;
}

}  // namespace ds4::server
