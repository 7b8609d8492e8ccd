// A pipeline worker (docs/DISTRIBUTED.md, "How a call travels"): holds a contiguous range of layers,
// registers with the coordinator (HELLO on a control connection; retried while the coordinator
// is down, again whenever the connection drops), and serves WORK on its data port.
//
// Per session id it keeps a Sequence and the token hash of what that sequence holds. A WORK is
// run only when its prefix_hash is the hash of the sequence's first pos0 tokens (rewinding to
// pos0 first when the sequence is ahead and can rewind); otherwise the answer is a RESULT with
// kStatusStateMismatch and nothing changes, and the coordinator replays. RESET_SESSION (or
// pos0 = 0) starts the session over. After its layers the worker forwards the hidden state to
// the next hop of the route without waiting (a relay thread per next-hop connection returns
// that hop's answers upstream in order, each with this hop's telemetry record appended), or,
// as the last hop, answers with the logits, the hidden state or an ACK. SNAPSHOT_SAVE_REQ and
// SNAPSHOT_LOAD_BEGIN save and load a session's state of this range.
#pragma once

#include <functional>
#include <memory>

#include <string>

#include "model/model.h"
#include "pipeline/options.h"

namespace ds4::pipeline {

// Sessions a worker keeps at once (the least recently used goes first).
inline constexpr int kMaxWorkerSessions = 8;

struct WorkerOptions {
    std::string model_path;
    model::OpenOptions open;      // threads, load; layers come from dist.layers
    model::SequenceOptions seq;   // ctx (HELLO's ctx_size), qat
    DistOptions dist;
    // Called once on the opened model, before serving (e.g. ds4's --ssd-streaming attaches
    // its expert cache); what it returns lives as long as the worker.
    std::function<std::shared_ptr<void>(model::Model&)> on_open;
};

// Runs until the process is stopped; returns non-zero (after printing why) when the worker
// cannot serve: the coordinator refused the registration (another model, overlapping layers),
// the keys differ, or the data port cannot be opened.
int run_worker(const WorkerOptions& o);

}  // namespace ds4::pipeline
