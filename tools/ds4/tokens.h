// ds4 --dump-tokens: print the token ids of a prompt on one line, space-separated.
//   Without --raw: the rendered one-turn chat prompt the CLI would prefill (prompt.h).
//   --raw: the prompt's literal bytes (no BOS, no template; marker text is plain text).
#pragma once

#include "options.h"
#include "prompt.h"

namespace ds4::cli {

// The prompt text of -p TEXT or --prompt-file FILE (the file's exact bytes).
std::string read_prompt(const Options& o);

// The one-turn chat of the options (-sys, thinking flags, --ctx) around `user`.
OneTurn one_turn(const Options& o, std::string user);

int run_dump_tokens(const Options& o);

}  // namespace ds4::cli
