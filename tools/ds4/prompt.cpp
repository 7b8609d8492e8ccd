#include "prompt.h"

#include "chat/message.h"
#include "chat/prompt_tokens.h"

namespace ds4::cli {

std::vector<int32_t> one_turn_tokens(const tokenizer::Tokenizer& tok, const OneTurn& turn) {
    std::vector<chat::Message> messages;
    if (!turn.system.empty()) messages.push_back({.role = chat::Role::System, .content = turn.system});
    messages.push_back({.role = chat::Role::User, .content = turn.user});
    chat::RenderOptions ro;
    ro.thinking = turn.thinking;
    ro.context_size = turn.context_size;
    return chat::tokenize_prompt(tok, chat::render_prompt(messages, ro));
}

}  // namespace ds4::cli
