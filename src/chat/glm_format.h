// The GLM 5.2 chat format (general.architecture "glm-dsa"; docs/CHAT_FORMAT.md "GLM 5.2"): the
// renderer of chat/glm_render.h, the <tool_call> output parser of chat/glm_output_parser.h and
// the markers of chat/glm_markers.h, as a ChatFormat.
//   * thinking: High and Max are one mode (GLM has no Think Max); Off writes <think></think>.
//   * replies end at <|endoftext|> or at the role marker that opens the next turn (stop_ids():
//     <|user|>, <|observation|> after tool calls, <|system|>, <|assistant|>), as upstream stops.
//   * sampling defaults T = 1, top-p = 0.95, min-p = 0 (spec/PRODUCT.md §9.1).
// It works from the vocabulary alone (a vocab-only GGUF is enough).
#pragma once

#include <memory>

#include "chat/format.h"

namespace ds4::chat {

// Throws ds4::Error naming the marker when the vocabulary lacks one of GLM's markers or has it
// as an ordinary token (chat/glm_markers.h lists them).
std::unique_ptr<ChatFormat> make_glm_format(const tokenizer::Tokenizer& tok);

}  // namespace ds4::chat
