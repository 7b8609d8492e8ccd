#include "server/metrics.h"

#include <fmt/format.h>

#include "server/request.h"

namespace ds4::server {

std::string Metrics::prometheus() const {
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, auto value) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
    };
    out += "# HELP ds4_requests_total Requests accepted, by API.\n# TYPE ds4_requests_total counter\n";
    for (int a = 0; a < 4; ++a)
        out += fmt::format("ds4_requests_total{{api=\"{}\"}} {}\n", to_string(Api(a)), requests[a].load());
    metric("ds4_request_errors_total", "counter", "Requests answered with an HTTP error.", errors.load());
    metric("ds4_prompt_tokens_total", "counter", "Prompt tokens of accepted requests.", prompt_tokens.load());
    metric("ds4_prompt_cached_tokens_total", "counter", "Prompt tokens reused from the live session.",
           cached_tokens.load());
    metric("ds4_generated_tokens_total", "counter", "Tokens generated.", generated_tokens.load());
    metric("ds4_cache_hits_total", "counter", "Requests that reused part of the live session.",
           cache_hits.load());
    metric("ds4_prefill_seconds_total", "counter", "Time spent evaluating prompts.", prefill_us.load() / 1e6);
    metric("ds4_decode_seconds_total", "counter", "Time spent generating.", decode_us.load() / 1e6);
    const double pre_s = prefill_us.load() / 1e6, dec_s = decode_us.load() / 1e6;
    metric("ds4_prefill_tokens_per_second", "gauge", "Average prefill speed.",
           pre_s > 0 ? prefill_evaluated.load() / pre_s : 0.0);
    metric("ds4_decode_tokens_per_second", "gauge", "Average generation speed.",
           dec_s > 0 ? generated_tokens.load() / dec_s : 0.0);
    metric("ds4_last_prefill_tokens_per_second", "gauge", "Prefill speed of the last request.",
           last_prefill_tps_milli.load() / 1000.0);
    metric("ds4_last_decode_tokens_per_second", "gauge", "Generation speed of the last request.",
           last_decode_tps_milli.load() / 1000.0);
    metric("ds4_queue_depth", "gauge", "Requests waiting for the engine.", queue_depth.load());
    metric("ds4_active_requests", "gauge", "Requests on a slot.", active.load());
    metric("ds4_slots", "gauge", "Slots (live sequences, --parallel).", slots.load());
    metric("ds4_slots_busy", "gauge", "Slots serving a request.", active.load());
    metric("ds4_queue_rejected_total", "counter", "Requests refused because the queue was full (--max-queue).",
           queue_rejected.load());
    metric("ds4_batch_steps_total", "counter", "Batched evaluations.", batch_steps.load());
    metric("ds4_batch_rows_total", "counter", "Token rows evaluated over all batched evaluations.",
           batch_rows.load());
    metric("ds4_batch_sequences_total", "counter", "Sequences over all batched evaluations (divide by "
           "ds4_batch_steps_total for the mean batch size).", batch_sequences.load());
    metric("ds4_draft_tokens_total", "counter", "Speculative drafts verified (--mtp).", draft_tokens.load());
    metric("ds4_draft_accepted_total", "counter", "Speculative drafts accepted (equal to what was sampled).",
           draft_accepted.load());
    metric("ds4_last_batch_sequences", "gauge", "Sequences in the last batched evaluation.",
           last_batch_sequences.load());
    metric("ds4_requests_in_flight", "gauge", "Generation requests accepted and not yet answered.", in_flight.load());
    metric("ds4_draining", "gauge", "1 while the server drains before stopping (SIGTERM): /health answers 503.",
           draining.load());
    metric("ds4_session_requests_total", "counter",
           "Requests that named a session (X-DS4-Session, user, metadata.user_id, ...).", session_requests.load());
    return out;
}

}  // namespace ds4::server
