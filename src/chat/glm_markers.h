// The GLM 5.2 chat marker strings (docs/CHAT_FORMAT.md "GLM 5.2"), the one place they are
// defined. In GLM's vocabulary every one is an added (control) token; the GLM renderer writes
// them as trusted text, so they tokenize as their ids. The GLM ChatFormat (chat/glm_format.h)
// resolves and checks the ids. Known ids in GLM 5.2's 154880-token vocabulary (upstream's
// check of the published file): <|endoftext|> 154820, [gMASK] 154822, <sop> 154824, <|system|>
// 154826 ... <|observation|> 154829, <think> 154841, </think> 154842, <tool_call> 154843 ...
// </arg_value> 154850. The format never hard-codes them.
#pragma once

#include <string_view>

namespace ds4::chat::glm {

inline constexpr std::string_view kGMask = "[gMASK]";  // the prompt's first token (BOS)
inline constexpr std::string_view kSop = "<sop>";      // follows [gMASK]
inline constexpr std::string_view kEndOfText = "<|endoftext|>";  // tokenizer.ggml.eos_token_id
inline constexpr std::string_view kSystem = "<|system|>";
inline constexpr std::string_view kUser = "<|user|>";
inline constexpr std::string_view kAssistant = "<|assistant|>";
inline constexpr std::string_view kObservation = "<|observation|>";  // opens tool results
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kToolCall = "<tool_call>";
inline constexpr std::string_view kToolCallEnd = "</tool_call>";
inline constexpr std::string_view kToolResponse = "<tool_response>";
inline constexpr std::string_view kToolResponseEnd = "</tool_response>";
inline constexpr std::string_view kArgKey = "<arg_key>";
inline constexpr std::string_view kArgKeyEnd = "</arg_key>";
inline constexpr std::string_view kArgValue = "<arg_value>";
inline constexpr std::string_view kArgValueEnd = "</arg_value>";

}  // namespace ds4::chat::glm
