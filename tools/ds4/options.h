// Command-line options of the ds4 CLI. Parsing lives in one function so each new mode (-p,
// -n, --ctx, --temp, ...) is one more field here and one more line in parse_options().
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "chat/format.h"
#include "chat/message.h"
#include "chat/render.h"
#include "frontend/model_options.h"
#include "logprob_options.h"
#include "imatrix_cli.h"
#include "speculative/options.h"

namespace ds4::cli {

enum class Mode { None, Inspect, EvalTokens, DumpTokens, Generate, Worker, DumpLogits, DecodeConsistency, ReplayCheck };

// -m, -t, --ctx (default 4096), --prefill-chunk, --no-qat, --no-mmap, SSD streaming and the
// pipeline roles come from ModelOptions; model_given is also set by a path after --inspect.
struct Options : frontend::ModelOptions {
    speculative::SpecOptions spec;  // --mtp, --mtp-draft, --mtp-margin
    Mode mode = Mode::None;

    // Evaluation (--token-ids): the ids are evaluated as they are (no BOS, no template).
    std::string token_ids;        // --token-ids FILE
    std::string dump_logits;      // --dump-logits-f32 OUT: [n_tokens][n_vocab] little-endian f32
    int n_predict = 0;            // -n N: --token-ids: greedy continuation ids; -p: max new tokens
    bool n_given = false;         // -n was on the command line (-p without it: until EOS or full)

    // Prompt and --dump-tokens.
    std::string prompt;           // -p TEXT
    std::string prompt_file;      // --prompt-file FILE (exact bytes)
    bool raw = false;             // --raw: no BOS, no template; marker text is plain text
    std::string prefix_file;      // --prefix-file FILE: the conversation before the prompt
    std::vector<chat::Message> prefix;  // its turns (chat/prefix_file.h), read while parsing

    // One-turn chat (-p / --prompt-file, and --dump-tokens without --raw).
    std::string system = "You are a helpful assistant";  // -sys TEXT (empty: no system message)
    chat::ThinkingMode thinking = chat::ThinkingMode::High;  // --think / --nothink / --think-max
    // Unset: the chat format's default (ChatFormat::sampling_defaults(); V4: T 1, top-p 1,
    // min-p 0.05; GLM: T 1, top-p 0.95, min-p 0).
    std::optional<float> temperature;  // --temp (0: greedy)
    std::optional<float> top_p;        // --top-p
    int top_k = 0;                     // --top-k (0: off)
    std::optional<float> min_p;        // --min-p
    std::optional<uint64_t> seed; // --seed (default: a random seed)

    // Diagnostics (diagnostics.h).
    std::string dump_logits_json;  // --dump-logits FILE (JSON; --dump-logits-f32 is the raw dump)
    int decode_consistency = 0;    // --decode-consistency N
    bool replay_check = false;     // --dist-replay-check
    bool raw_prompt = false;       // --raw-prompt
    int power = 100;               // --power N
    LogprobOptions logprob;        // --logprob-vectors, --perplexity-file, --dump-logprobs (logprobs.h)
    ImatrixOptions imatrix;        // --imatrix-* (imatrix_cli.h)
};

// Parses argv. Returns the options, or an exit code when parsing ends the run (--help
// prints and gives 0; a usage error prints to stderr and gives non-zero).
struct ParseResult {
    Options options;
    std::optional<int> exit_code;
};
ParseResult parse_options(int argc, char** argv);

}  // namespace ds4::cli
