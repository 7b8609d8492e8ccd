// The one-turn chat prompt of the ds4 CLI (spec/PRODUCT.md §2.5): [system] + user message, rendered by
// the model's chat format (chat/format.h), then tokenized so that only the renderer's own text can
// produce control tokens. The system and user texts are untrusted: a user who types "<｜User｜>"
// gets plain-text tokens, never the marker (DS4's tokenize_rendered_chat matches markers, its
// user text path does not).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/format.h"
#include "chat/message.h"

namespace ds4::cli {

struct OneTurn {
    std::string system;  // empty: no system message
    std::vector<chat::Message> prefix{};  // --prefix-file's turns, between the system and the user
    std::string user;
    chat::ThinkingMode thinking = chat::ThinkingMode::High;
    int64_t context_size = 0;  // for the Think Max gate
};

// Renders `turn` (with the generation prompt) in `format` and tokenizes it: markers are matched
// in the renderer's text only, never in the system or user text.
std::vector<int32_t> one_turn_tokens(const chat::ChatFormat& format, const OneTurn& turn);

}  // namespace ds4::cli
