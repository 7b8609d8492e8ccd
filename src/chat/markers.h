// The DeepSeek V4 chat marker strings (spec/TOKENIZER_CHAT.md §1.2, §3), the one place they are
// defined. The V4 renderer writes them as text; rendered text is trusted, so they tokenize as
// their control tokens. The V4 ChatFormat (chat/deepseek4_format.h) resolves their ids.
#pragma once

#include <string_view>

namespace ds4::chat {

inline constexpr std::string_view kBos = "<｜begin▁of▁sentence｜>";
inline constexpr std::string_view kEos = "<｜end▁of▁sentence｜>";
inline constexpr std::string_view kUser = "<｜User｜>";
inline constexpr std::string_view kAssistant = "<｜Assistant｜>";
inline constexpr std::string_view kThinkStart = "<think>";
inline constexpr std::string_view kThinkEnd = "</think>";
inline constexpr std::string_view kDsml = "｜DSML｜";

}  // namespace ds4::chat
