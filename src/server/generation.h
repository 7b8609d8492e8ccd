// Runs one job on the engine (spec/PRODUCT.md §4.6, §4.9, §4.10): prefill through Engine::sync
// (only the suffix the live session lacks), with ": prefill" SSE comments as keepalive; then
// generation, detokenized with StreamDecoder, cut at stop sequences (the last max_len - 1
// bytes are held back until decided), parsed by OutputParser into reasoning / content / tool
// calls and handed to the API writer. Generation stops at the end of a tool-call block.
// Finish: tool_calls after a complete block, error for an unterminated block or a cancel,
// length at the token limit or a full context, else stop.
#pragma once

#include "engine/engine.h"
#include "server/job.h"
#include "server/metrics.h"

namespace ds4::server {

// Runs `job` to completion and closes its channel. Never throws: an engine error becomes an
// HTTP 500 (nothing streamed yet) or an SSE error event.
void run_job(engine::Engine& engine, Job& job, Metrics& metrics);

// Applies stop sequences to streamed text: feed() returns the bytes that are certainly
// before any stop; once a stop is found, hit() is true and the rest is dropped.
class StopScanner {
public:
    explicit StopScanner(std::vector<std::string> stops);
    std::string feed(std::string_view text);
    std::string flush();  // the held-back tail (no stop was found)
    bool hit() const { return hit_; }
    const std::string& stop() const { return stop_; }

private:
    std::vector<std::string> stops_;
    size_t hold_ = 0;  // longest stop - 1
    std::string buf_;
    bool hit_ = false;
    std::string stop_;
};

}  // namespace ds4::server
