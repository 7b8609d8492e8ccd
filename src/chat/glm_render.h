// The GLM 5.2 format's renderer: what chat/glm_format.h's ChatFormat renders with (callers
// outside src/chat go through the ChatFormat). Byte-identical to llama.cpp's GLM-4.7-Flash jinja
// template (the nearest GLM template that llama.cpp ships) with GLM 5.2's empty reasoning
// written as <think></think> where 4.7 writes a bare </think> (docs/CHAT_FORMAT.md lists this
// and every other difference, with the evidence). The result is trusted text: marker strings
// in it become control tokens when tokenized; message and tool text are untrusted spans.
//
// Rules, in order:
//   [gMASK]<sop>; with tools (a non-empty array) the tools system turn: <|system|> and the
//   template's fixed preamble listing each tool as JSON (the whole OpenAI entry, Python
//   json.dumps spacing) between <tools> lines. Then each message in place:
//     system / developer: <|system|>content
//     user: <|user|>content
//     tool: <|observation|> (once per run of consecutive tool messages), then
//       <tool_response>content</tool_response>
//     assistant: <|assistant|>, then <think>reasoning</think> (reasoning stripped) when it is
//       kept and not empty, else <think></think>; the content stripped; then each tool call as
//       <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>, string
//       values raw and other values as JSON. Reasoning is kept for turns after the last user
//       message (tool results do not count), or for every turn with drop_thinking off. An
//       assistant message without reasoning whose content holds </think> has its reasoning
//       split off the content, as the template does.
//   The generation prompt is <|assistant|><think> (thinking) or <|assistant|><think></think>.
// GLM has no Think Max: Max renders as High. There is no response-format section.
#pragma once

#include <string>
#include <vector>

#include "chat/conversation.h"
#include "chat/message.h"

namespace ds4::chat::glm {

// Throws ds4::Error when tools_json is not valid JSON or not an array. Tool-call arguments that
// are not a JSON object are rendered as one string argument named "arguments".
RenderedPrompt render_prompt(const std::vector<Message>& messages, const RenderOptions& options);

// The canonical text of an assistant's tool calls: the <tool_call> blocks back to back (empty
// for none). A reply's calls parse back to the same names and argument values (as JSON) when
// the parser has the tools' schemas, or without them when no string value reads as another
// JSON value ("42", "true", "null", "[1]"...).
std::string render_tool_calls(const std::vector<ToolCall>& calls);

// The first bytes of a reply that must call a tool (tool_choice "required" or a named tool):
// <tool_call>, then the tool's name when `tool` is not empty; in thinking mode (the prompt ends
// with <think>) "</think>" first, so the model does not think before a forced call. This is
// what the history rendering of a reply without reasoning or content writes, so the next
// turn's prompt continues it token for token. Appended to `prompt` (the name as untrusted
// text); returns the appended text.
std::string append_tool_call_opening(RenderedPrompt& prompt, bool thinking, std::string_view tool);

}  // namespace ds4::chat::glm
