#include "prompt.h"

#include "chat/message.h"

namespace ds4::cli {

std::vector<int32_t> one_turn_tokens(const chat::ChatFormat& format, const OneTurn& turn) {
    std::vector<chat::Message> messages;
    auto add = [&](chat::Role role, const std::string& content) {
        messages.emplace_back();
        messages.back().role = role;
        messages.back().content = content;
    };
    if (!turn.system.empty()) add(chat::Role::System, turn.system);
    messages.insert(messages.end(), turn.prefix.begin(), turn.prefix.end());
    add(chat::Role::User, turn.user);
    chat::RenderOptions ro;
    ro.thinking = turn.thinking;
    ro.context_size = turn.context_size;
    return format.tokenize(format.render(messages, ro));
}

}  // namespace ds4::cli
