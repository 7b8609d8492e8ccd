// ds4 without -p: the interactive chat (spec/PRODUCT.md §3.2). A real multi-turn conversation over
// one live KV session: each turn appends the closing EOS of the previous reply and the new
// user turn to the transcript, so only that suffix is prefilled. Commands:
//   /help  /think  /think-max  /nothink  /ctx N (restart with a new context)  /read FILE
//   (the file's text is the next user message)  /quit  /exit
// Ctrl+C during a reply stops it and returns to the prompt (during prefill, or before the
// first token, the turn is rolled back); Ctrl+C at the prompt exits (status 130); Ctrl+D ends.
// On a terminal input has line editing and a history in ~/.ds4_history; from a pipe, lines
// are read as they come and no prompt is printed.
#pragma once

#include "options.h"

namespace ds4::cli {

int run_chat(const Options& o);

}  // namespace ds4::cli
