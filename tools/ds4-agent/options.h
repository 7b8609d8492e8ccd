// Command-line options of ds4-agent (spec/PRODUCT.md §9.3): every runtime flag ds4 takes
// (frontend::ModelOptions: -m -t -c --prefill-chunk --no-qat --no-mmap, SSD streaming, the
// pipeline coordinator; speculative decoding) plus the agent's own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "chat/message.h"
#include "frontend/model_options.h"
#include "speculative/options.h"

namespace ds4::agent_cli {

struct Options : frontend::ModelOptions {
    speculative::SpecOptions spec;
    std::string prompt;            // -p TEXT: the first message
    std::string prompt_file;       // --prompt-file FILE
    std::string prefix_file;       // --prefix-file FILE
    std::vector<chat::Message> prefix;  // its turns (chat/prefix_file.h), read while parsing
    bool non_interactive = false;  // --non-interactive: one turn with -p, else a turn per stdin line
    std::string system;            // -sys TEXT: added to the agent's own system prompt
    std::string chdir;             // --chdir DIR: the tools' root (default: the current directory)
    bool allow_outside = false;    // --allow-outside: file tools may leave the root
    bool yes = false;              // --yes: writes and commands without asking
    std::string trace;             // --trace FILE
    std::string session_dir;       // --session-dir DIR (default ~/.ds4/sessions)
    std::string script_replies;    // --script-replies FILE (test hook: JSON array of replies)
    int64_t max_reply_tokens = 8192;  // -n
    int max_steps = 64;            // --max-steps
    chat::ThinkingMode thinking = chat::ThinkingMode::High;
    std::optional<float> temperature, top_p, min_p;
    int top_k = 0;
    std::optional<uint64_t> seed;
};

struct ParseResult {
    Options options;
    std::optional<int> exit_code;
};
ParseResult parse_options(int argc, char** argv);

}  // namespace ds4::agent_cli
