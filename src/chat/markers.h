// The DeepSeek V4 chat marker strings (spec/TOKENIZER_CHAT.md §1.2, §3). The renderer writes them as
// text; the tokenizer turns them into control tokens because rendered text is trusted.
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
