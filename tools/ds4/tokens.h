// ds4 --dump-tokens: print the token ids of a prompt on one line, space-separated.
//   --raw: the prompt's literal bytes (no BOS, no template; marker text is plain text).
#pragma once

#include "options.h"

namespace ds4::cli {

// The prompt text of -p TEXT or --prompt-file FILE (the file's exact bytes).
std::string read_prompt(const Options& o);

int run_dump_tokens(const Options& o);

}  // namespace ds4::cli
