// The model and runtime flags ds4, ds4-server and ds4-bench share, declared once: -m, -t, -c,
// --prefill-chunk, --no-qat, --no-mmap, plus the SSD streaming (streaming/options.h) and
// pipeline (pipeline/options.h) groups, which each tool adds where its help lists them.
//
//   struct Options : frontend::ModelOptions { ... };        // the tool's own fields besides
//   frontend::add_model_flags(app, o, {.group = "Runtime", ...});
//   streaming::add_flags(app, o.streaming);  pipeline::add_dist_flags(app, o.dist);
//   if (auto exit_code = frontend::parse(app, argc, argv, o)) return *exit_code;
//
// The tools differ only in presentation (help groups, --ctx's names, default and text), which
// FlagLook carries; names, checks and their messages are the same everywhere.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/model.h"
#include "frontend/steering_options.h"
#include "model/session.h"
#include "pipeline/options.h"
#include "streaming/options.h"

namespace ds4::frontend {

struct ModelOptions {
    std::string model = "./ds4flash.gguf";  // -m/--model
    bool model_given = false;               // -m was on the command line
    int threads = 0;                        // -t/--threads (0: all cores; common/thread_count.h)
    int64_t ctx = 4096;                     // -c/--ctx (each tool sets its own default)
    bool ctx_given = false;                 // -c was on the command line
    int64_t prefill_chunk = 512;            // --prefill-chunk (1 = token-by-token decode)
    bool qat = true;                        // --no-qat turns the FP8/FP4 simulations off
    bool no_mmap = false;                   // --no-mmap: weights read into (huge-page) memory
    streaming::Options streaming;           // --ssd-streaming*, --expert-profile
    pipeline::DistOptions dist;             // --role, --layers, --listen, --dist-*, --debug
    SteeringOptions steering;               // --dir-steering-* (ds4, ds4-server: add_steering_flags)
    bool warm_weights = false;              // --warm-weights: touch every weight page at start-up

    // --threads resolved (0: all cores), --no-mmap and --ssd-streaming as model::open takes them.
    model::OpenOptions open_options() const;
    // A sequence of --ctx with --no-qat.
    model::SequenceOptions sequence() const { return {.ctx = ctx, .qat = qat}; }
    // A session of --ctx, --prefill-chunk and --no-qat (the rewind slack left at its default).
    model::SessionOptions session() const { return {.ctx = ctx, .prefill_chunk = prefill_chunk, .qat = qat}; }
};

// How one tool shows the shared flags in its --help.
struct FlagLook {
    std::string model_group{};              // -m ("": CLI11's default group)
    std::string group = "Model and runtime";  // -t, -c
    std::string eval_group{};               // --prefill-chunk, --no-qat, --no-mmap ("": group)
    std::string ctx_names = "-c,--ctx";
    std::string ctx_help = "Context size in tokens (default 4096)";
    int64_t ctx_min = 1;                    // the smallest --ctx accepted
    std::string prefill_help = "Prefill chunk size in tokens (default 512)";
    std::string qat_help = "Turn off the FP8 KV / FP4 indexer simulations (llama.cpp omits them)";
};

// Adds -m, -t, -c, --prefill-chunk, --no-qat and --no-mmap to `app` (model_given and ctx_given
// are set while parsing).
void add_model_flags(CLI::App& app, ModelOptions& o, const FlagLook& look = {});

// After parsing: the combinations the flags alone cannot check (streaming::check,
// pipeline::dist_options_error); the message of the first one broken, "" when fine.
std::string flag_error(const ModelOptions& o);

// app.parse(), resolve_steering(), then flag_error(): nullopt when the run goes on, else the
// exit code (--help: 0; a usage error, printed by CLI11 or as "<app name>: <flag_error>":
// non-zero).
std::optional<int> parse(CLI::App& app, int argc, char** argv, ModelOptions& o);

// argv as strings, with upstream's "-sys TEXT" / "-sys=TEXT" rewritten to --system (CLI11 short
// names are one character, so it cannot declare them); nothing after "--" is touched.
std::vector<std::string> upstream_spellings(int argc, char** argv);

}  // namespace ds4::frontend
