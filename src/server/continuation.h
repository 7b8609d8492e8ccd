// Requests that continue an earlier reply by reference (spec/PRODUCT.md §4.8; docs/SERVER.md
// "Live continuations and previous_response_id"):
//   * Responses `previous_response_id`: the stored turn's conversation (without its
//     instructions, which OpenAI does not carry over) comes before the request's input;
//   * live continuations: Responses `function_call_output` items and Anthropic `tool_result`
//     blocks whose call is not in the request continue the reply that made the call (the
//     turn stored under its call id), so a client may send only the results.
// The expanded request renders like any other; continue_tokens() then keeps the turn's own
// tokens (what the live session holds: the prompt and the reply as sampled) and tokenizes only
// the text after them, so the scheduler reuses the whole live session instead of re-evaluating
// a re-tokenized history.
#pragma once

#include <memory>
#include <vector>

#include "chat/format.h"
#include "server/request.h"
#include "server/response_store.h"

namespace ds4::server {

// Expands `r` (Responses and Messages; others unchanged) and returns the turn it continues
// (null: none). Throws RequestError 400 in the API's terms for a previous_response_id that is
// not stored (code previous_response_not_found) and for results naming call ids the server
// never issued or no longer remembers, or ids of different replies (`store` may be null: then
// nothing is remembered).
std::shared_ptr<const StoredTurn> expand_continuation(Request& r, ResponseStore* store);

// The prompt's tokens: `turn`'s tokens and then the tokens of the rendered text after them
// when the text starts with the turn's text (with its untrusted spans kept), else the whole
// prompt tokenized.
std::vector<int32_t> continue_tokens(const chat::ChatFormat& format, const chat::RenderedPrompt& prompt,
                                     const StoredTurn* turn);

// The turn a finished reply leaves: the request's (expanded) messages, the reply as an
// assistant message with the ids its calls were given, and the session's tokens.
std::shared_ptr<StoredTurn> finished_turn(const Request& r, const chat::ParsedOutput& reply,
                                          const std::vector<std::string>& call_ids, std::vector<int32_t> tokens,
                                          std::string text);

}  // namespace ds4::server
