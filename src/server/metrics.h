// Counters for GET /metrics (Prometheus text exposition format 0.0.4). Updated by the HTTP
// threads and the engine worker; every field is an atomic, the snapshot is not transactional.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace ds4::server {

struct Metrics {
    std::atomic<uint64_t> requests[4] = {};       // per Api (request.h order)
    std::atomic<uint64_t> errors = 0;             // requests answered with an HTTP error
    std::atomic<uint64_t> prompt_tokens = 0;
    std::atomic<uint64_t> cached_tokens = 0;      // prompt tokens reused from the live session
    std::atomic<uint64_t> generated_tokens = 0;
    std::atomic<uint64_t> cache_hits = 0;         // requests that reused at least one position
    std::atomic<uint64_t> prefill_us = 0;         // time spent evaluating prompts
    std::atomic<uint64_t> decode_us = 0;          // time spent generating
    std::atomic<uint64_t> prefill_evaluated = 0;  // prompt tokens actually evaluated
    std::atomic<int64_t> queue_depth = 0;         // jobs waiting for the engine
    std::atomic<int64_t> active = 0;              // jobs on a slot (busy slots)
    std::atomic<int64_t> slots = 0;               // --parallel
    std::atomic<uint64_t> queue_rejected = 0;     // requests refused: the queue was full
    std::atomic<uint64_t> batch_steps = 0;        // batched evaluations
    std::atomic<uint64_t> batch_rows = 0;         // token rows over all steps
    std::atomic<uint64_t> batch_sequences = 0;    // sequences over all steps
    std::atomic<uint64_t> draft_tokens = 0;       // speculative drafts verified (--mtp)
    std::atomic<uint64_t> draft_accepted = 0;     // of those, accepted
    std::atomic<int64_t> last_batch_sequences = 0;
    std::atomic<int64_t> last_prefill_tps_milli = 0;
    std::atomic<int64_t> last_decode_tps_milli = 0;
    std::atomic<int64_t> in_flight = 0;           // generation requests accepted and not yet answered
    std::atomic<int64_t> draining = 0;            // 1 once a drain began (SIGTERM)
    std::atomic<uint64_t> session_requests = 0;   // requests that named a session (header or body)

    std::string prometheus() const;
};

}  // namespace ds4::server
