// Command-line options of ds4-bench (spec/PRODUCT.md §3.5): the model, the token sequence (text
// tokenized raw, or exact ids for models without a vocabulary), the frontier shape and the
// runtime settings of the Session it drives.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "frontend/model_options.h"
#include "speculative/options.h"
#include "frontier.h"

namespace ds4::bench {

// -m, -t, --ctx/--ctx-alloc (here 0: the last frontier + --gen-tokens), --prefill-chunk,
// --no-qat, --no-mmap, SSD streaming and --role coordinator ... (measure over a pipeline; it
// waits for the route) come from ModelOptions.
struct Options : frontend::ModelOptions {
    Options() { ctx = 0; }
    std::string prompt_file;    // --prompt-file FILE: text, tokenized raw (no BOS, no template)
    std::string token_ids;      // --token-ids FILE: whitespace-separated ids, used as they are
    SweepShape shape;           // --ctx-start, --ctx-max, --step-incr, --gen-tokens
    std::string csv;            // --csv OUT (empty: table only)
    int64_t sessions = 1;       // --sessions N: sequences decoding together in each probe
    int64_t warmup = 0;         // --warmup N: untimed prefill of N tokens first, then reset
    std::string dump_probe_ids; // --dump-probe-ids FILE: each probe's greedy ids, one line per row
    // --spec-aid N[,N...]: after the plain probe, probes verifying N drafts per step from the
    // aid (aid_drafter.h), one per depth and --spec-aid-accept P[,P...] (default 1).
    std::vector<int64_t> spec_aid;
    std::vector<double> spec_aid_accept{1.0};
    bool spec_aid_backoff = false;  // --spec-aid-backoff: the generator's draft back-off on
    speculative::SpecOptions spec;  // --mtp, --dspark, ...: a probe with the real drafter too
    // --limits: each row also says how far it is from the machine's limits (machine_limits.h): decode
    // against the read bandwidth (probed once before the walk unless --membw gives it), prefill
    // against the int8 peak (measured unless --int8-peak gives it).
    bool limits = false;
    double membw_gbps = 0;      // --membw GB/s (0: probe)
    double int8_peak_gops = 0;  // --int8-peak GOP/s (0: measure)
    // --profile: after each row, where its decode probe's weight products went (per format and
    // activation rows per call: bytes, thread time, GB/s and GMAC/s per thread; ops/matmul.h).
    bool profile = false;
};

struct ParseResult {
    Options options;
    std::optional<int> exit_code;  // set when parsing ends the run (--help: 0, usage error: 2)
};
ParseResult parse_options(int argc, char** argv);

}  // namespace ds4::bench
