// Tokenizing a rendered prompt (spec/TOKENIZER_CHAT.md §1): control tokens are matched only in the
// renderer's own (trusted) text; a marker look-alike inside message or tool text stays plain
// text. Between two markers the text, trusted and untrusted alike, is encoded as one plain
// stretch, so token boundaries are those of the whole string.
#pragma once

#include <cstdint>
#include <vector>

#include "chat/conversation.h"

namespace ds4::tokenizer {
class Tokenizer;
}

namespace ds4::chat {

std::vector<int32_t> tokenize_prompt(const tokenizer::Tokenizer& tok, const RenderedPrompt& prompt);

}  // namespace ds4::chat
