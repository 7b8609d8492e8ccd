// The DeepSeek V4 chat format (spec/TOKENIZER_CHAT.md §3, §4): the renderer of chat/render.h,
// the DSML output parser of chat/output_parser.h and the markers of chat/markers.h, as a
// ChatFormat. Its output is byte for byte what those functions give (tests/unit/chat_format_test).
#pragma once

#include <memory>

#include "chat/format.h"

namespace ds4::chat {

// Throws ds4::Error when the vocabulary lacks one of the seven V4 markers (naming it) or when
// tokenizer.ggml.eos_token_id is not <｜end▁of▁sentence｜> (generation would not stop at the
// end of a turn).
std::unique_ptr<ChatFormat> make_deepseek4_format(const tokenizer::Tokenizer& tok);

}  // namespace ds4::chat
