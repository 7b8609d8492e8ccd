// Model start-up, once for every front end (ds4's chat, one-shot and --token-ids modes,
// ds4-server, ds4-bench, and ds4's pipeline worker): open the model (over the pipeline with
// --role coordinator), load the tokenizer when wanted, check the context against the model and
// the memory, then attach the SSD streaming cache / expert profile sized by what the run
// keeps besides it.
//
//   auto run = frontend::start_model(o, {.tool = "ds4-bench", .sequences = o.sessions});
//   model::Session s(*run.model, o.session());
#pragma once

#include <cstdint>
#include <memory>

#include "frontend/instance.h"
#include "frontend/model_options.h"
#include "model/model.h"
#include "pipeline/worker.h"
#include "streaming/options.h"
#include "streaming/used_memory.h"
#include "tokenizer/tokenizer.h"

namespace ds4::frontend {

// What a front end asks of start_model().
struct StartRequest {
    const char* tool = "ds4";      // names the program in the lines it logs and its refusals
    int64_t sequences = 1;         // sequences the run keeps live (memory check, cache budget)
    int64_t spare = 0;             // copies of a sequence it may hold besides (snapshots): budget only
    const char* sequences_flag = nullptr;  // the flag that sets `sequences` ("--parallel"), for messages
    bool tokenizer = false;        // also load the tokenizer
    // Without -c on the command line, a default --ctx above the model's trained context is
    // lowered to it (with a line saying so) instead of refused (ds4-server's default).
    bool fit_trained_context = false;
    // Refuse a --ctx above the model's trained context (ds4-bench may measure past it).
    bool check_trained_context = true;
};

// What start_model() opened. Members go in reverse order: the model before the streaming
// attachment, whose destruction logs the cache counters and writes --expert-profile.
struct Started {
    std::unique_ptr<InstanceLock> lock;                // DS4_LOCK_FILE (frontend/instance.h), held to the end
    std::unique_ptr<streaming::UsedMemory> used_memory;  // --simulate-used-memory, taken before the load
    std::unique_ptr<streaming::Attachment> streaming;  // nullptr without --ssd-streaming / --expert-profile
    std::unique_ptr<model::Model> model;
    std::unique_ptr<tokenizer::Tokenizer> tokenizer;   // when asked for
    int threads = 0;                                   // --threads resolved
    int64_t ctx = 0;                                   // the context the run uses
};

// Throws ds4::Error (the file cannot be opened, the context does not fit, --role worker, ...).
Started start_model(const ModelOptions& o, const StartRequest& r = {});

// `ds4 --role worker`: the worker's options with the same open options and, once its model
// is open, the same streaming attachment, sized for pipeline::kMaxWorkerSessions sequences.
pipeline::WorkerOptions worker_options(const ModelOptions& o);

}  // namespace ds4::frontend
