// The DeepSeek V4 format's renderer: what chat/deepseek4_format.h's ChatFormat renders with
// (callers outside src/chat go through the ChatFormat). Renders a conversation to the DeepSeek
// V4 prompt text (spec/TOKENIZER_CHAT.md §3), byte-identical to llama.cpp's DeepSeek-V4 jinja
// template plus llama.cpp's tool-result ordering. The result is trusted text: marker strings in
// it become control tokens when tokenized.
//
// Rules, in order (see render.cpp for the why):
//   BOS; the Think Max prefix (thinking Max, only when context_size >= kThinkMaxMinContext,
//   otherwise Max is rendered as High); all system messages joined with "\n\n"; then the tools
//   block (after "\n\n" when there is system text); then the optional response-format section.
//   user/developer/tool messages open a <｜User｜> turn (consecutive ones join with "\n\n"; a tool
//   result is <tool_result>…</tool_result>, results reordered into the order of the preceding
//   assistant's tool_calls by id); an assistant message is <｜Assistant｜>, then <think>reasoning
//   </think> when thinking and the reasoning is kept, else </think>; then content, the DSML
//   tool-call block, EOS. The generation prompt is <｜Assistant｜><think> or <｜Assistant｜></think>.
//   Reasoning is kept for turns after the last user/tool message, and for every turn when tools
//   are defined or any tool result is in the history (drop_thinking off keeps all).
#pragma once

#include "chat/conversation.h"
#include "chat/message.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds4::chat {

// DeepSeek recommends Think Max only with at least 384K of context; below that DS4 downgrades
// Max to High (spec/TOKENIZER_CHAT.md §3.1, spec/PRODUCT.md §4.4).
inline constexpr int64_t kThinkMaxMinContext = 393216;

// Max with a context below kThinkMaxMinContext becomes High; other modes are unchanged.
ThinkingMode effective_thinking(ThinkingMode mode, int64_t context_size);

// The original V4 Think Max prefix (written right after BOS).
extern const std::string_view kThinkMaxPrefix;

// Throws ds4::Error when tools_json / response_format_json is not valid JSON or tools_json is
// not an array. Tool-call arguments that are not a JSON object are rendered as one string
// parameter named "arguments" (what the official encoder does).
std::string render(const std::vector<Message>& messages, const RenderOptions& options);
// The same text, with its untrusted spans.
RenderedPrompt render_prompt(const std::vector<Message>& messages, const RenderOptions& options);

// The DSML block for an assistant's tool calls, starting with "\n\n<｜DSML｜tool_calls>\n"
// and ending with "</｜DSML｜tool_calls>" (no EOS). Empty when calls is empty.
std::string render_tool_calls(const std::vector<ToolCall>& calls);

// The first bytes of a reply that must call a tool (tool_choice "required" or a named tool;
// spec/PRODUCT.md §4.5): "\n\n<｜DSML｜tool_calls>\n", then, when `tool` is not empty,
// "<｜DSML｜invoke name=\"TOOL\">\n" — exactly what the canonical history rendering of a
// reply without content writes, so the next turn's prompt continues it token for token. In
// thinking mode (the prompt ends with <think>) the reply first closes its reasoning: "</think>"
// comes first, and the model does not think before a forced call. Appended to `prompt` (the
// tool name as untrusted text); returns the appended text.
std::string append_tool_call_opening(RenderedPrompt& prompt, bool thinking, std::string_view tool);

// The "## Tools" system section for an OpenAI tools array (ends with a newline).
std::string render_tools_block(const std::string& tools_json);

}  // namespace ds4::chat
