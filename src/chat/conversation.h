// What a chat format renders from and to, the same for every format (chat/format.h): the
// thinking mode, the render options, and the rendered prompt with its untrusted spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "chat/message.h"

namespace ds4::chat {

enum class ThinkingMode { Off, High, Max };

struct RenderOptions {
    ThinkingMode thinking = ThinkingMode::High;
    int64_t context_size = 0;          // for a format's context gates (V4: Think Max)
    std::string tools_json;            // OpenAI "tools" array as JSON text; empty = no tools
    std::string response_format_json;  // a JSON schema; empty = none
    bool add_generation_prompt = true;
    bool drop_thinking = true;         // false keeps every turn's reasoning (thinking mode)
    // Exact tool replay (spec/PRODUCT.md §4.7): for an assistant message's tool calls, the text
    // to write instead of the format's canonical tool-call text (what the model sampled, from
    // the server's tool memory), or nullopt for the canonical form. Written as trusted text: it
    // must come from the model, never from the client.
    std::function<std::optional<std::string>(const std::vector<ToolCall>& calls)> exact_tool_block;
};

// A rendered prompt: the text, and which byte ranges of it came from the messages or the tools
// (untrusted: marker look-alikes there are plain text; see chat/prompt_tokens.h).
struct TextSpan {
    size_t offset, length;
};
struct RenderedPrompt {
    std::string text;
    std::vector<TextSpan> untrusted;  // ascending, non-overlapping
};

}  // namespace ds4::chat
