// Command-line options of ds4-bench (spec/PRODUCT.md §3.5): the model, the token sequence (text
// tokenized raw, or exact ids for models without a vocabulary), the frontier shape and the
// runtime settings of the Session it drives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "frontier.h"
#include "streaming/options.h"
#include "pipeline/options.h"

namespace ds4::bench {

struct Options {
    std::string model = "./ds4flash.gguf";  // -m/--model
    std::string prompt_file;    // --prompt-file FILE: text, tokenized raw (no BOS, no template)
    std::string token_ids;      // --token-ids FILE: whitespace-separated ids, used as they are
    SweepShape shape;           // --ctx-start, --ctx-max, --step-incr, --gen-tokens
    std::string csv;            // --csv OUT (empty: table only)
    int64_t sessions = 1;       // --sessions N: sequences decoding together in each probe
    int threads = 0;            // -t/--threads (0: all cores)
    int64_t ctx = 0;            // --ctx/--ctx-alloc (0: last frontier + gen-tokens)
    int64_t prefill_chunk = 512;  // --prefill-chunk
    int64_t warmup = 0;         // --warmup N: untimed prefill of N tokens first, then reset
    bool qat = true;            // --no-qat
    bool no_mmap = false;       // --no-mmap
    streaming::Options streaming;  // --ssd-streaming*, --expert-profile
    std::string dump_probe_ids; // --dump-probe-ids FILE: each probe's greedy ids, one line per row
    pipeline::DistOptions dist; // --role coordinator ...: measure over a pipeline (waits for the route)
};

struct ParseResult {
    Options options;
    std::optional<int> exit_code;  // set when parsing ends the run (--help: 0, usage error: 2)
};
ParseResult parse_options(int argc, char** argv);

}  // namespace ds4::bench
