// Command-line options of the ds4 CLI. Parsing lives in one function so each new mode (-p,
// -n, --ctx, --temp, ...) is one more field here and one more line in parse_options().
#pragma once

#include <optional>
#include <string>

namespace ds4::cli {

enum class Mode { None, Inspect, EvalTokens, DumpTokens };

struct Options {
    std::string model = "./ds4flash.gguf";  // -m/--model
    bool model_given = false;               // -m or a path after --inspect was on the command line
    Mode mode = Mode::None;

    // Evaluation (--token-ids): the ids are evaluated as they are (no BOS, no template).
    std::string token_ids;        // --token-ids FILE
    std::string dump_logits;      // --dump-logits-f32 OUT: [n_tokens][n_vocab] little-endian f32
    int n_predict = 0;            // -n N: greedy continuation after the ids
    int threads = 0;              // --threads (0: all cores)
    long long ctx = 4096;         // --ctx
    long long prefill_chunk = 512;  // --prefill-chunk (1 = token-by-token decode)
    bool qat = true;              // --no-qat turns the FP8/FP4 simulations off

    // Prompt and --dump-tokens.
    std::string prompt;           // -p TEXT
    std::string prompt_file;      // --prompt-file FILE (exact bytes)
    bool raw = false;             // --raw: no BOS, no template; marker text is plain text
};

// Parses argv. Returns the options, or an exit code when parsing ends the run (--help
// prints and gives 0; a usage error prints to stderr and gives non-zero).
struct ParseResult {
    Options options;
    std::optional<int> exit_code;
};
ParseResult parse_options(int argc, char** argv);

}  // namespace ds4::cli
