// Turns one generation into an API's response (spec/PRODUCT.md §4.9): the SSE event stream when the
// request streams, else the final JSON body. The generation loop (server/generation.h) calls
// begin() once the prompt is evaluated, event() for each parser event, finish() at the end;
// each appends the bytes to send to `out` (for a non-streaming request only finish() writes:
// the whole body). Tool ids are drawn here (server/ids.h), one per streamed call.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "chat/output.h"
#include "server/request.h"

namespace ds4::server {

struct Usage {
    int64_t prompt = 0;      // prompt tokens
    int64_t cached = 0;      // reused from the live session
    int64_t written = 0;     // newly evaluated (prompt - cached)
    int64_t completion = 0;  // generated tokens
    int64_t reasoning = 0;   // of those, generated while the output was still reasoning
                             // (before </think>; the </think> token included)
};

enum class Finish { Stop, Length, ToolCalls, Error };
const char* to_string(Finish f);  // OpenAI spelling: stop, length, tool_calls, error

struct FinishInfo {
    Finish reason = Finish::Stop;
    std::string error;               // with Finish::Error: why
    int error_status = 500;          // with Finish::Error: 503 shutdown, 504 request timeout
    std::string stop_sequence;       // the stop sequence that ended the text, if any
    bool reasoning_complete = true;  // false: thinking never reached </think>
    Usage usage;
    chat::ParsedOutput parsed;       // the authoritative parse of the whole output
};

// What every response names: the model id reported back, a per-process sequence number for
// chatcmpl-/cmpl- ids, and the creation time (Unix seconds).
struct ResponseMeta {
    std::string model;
    uint64_t seq = 0;
    int64_t created = 0;
};

// One answer token's log-probabilities (Request::logprobs >= 0; sampling/logprobs.h): its
// bytes, its natural-log probability, and the most likely alternatives at its position.
struct TokenLogprobs {
    std::string token;
    float logprob = 0;
    std::vector<std::pair<std::string, float>> top;
};

class ApiWriter {
public:
    virtual ~ApiWriter() = default;
    virtual void begin(const Usage& prompt_usage, std::string& out) = 0;
    virtual void event(const chat::OutputEvent& e, std::string& out) = 0;
    virtual void finish(const FinishInfo& f, std::string& out) = 0;
    // After a token's text went to event(): its log-probabilities (chat and completions report
    // them, streamed as a chunk of their own or gathered into the final body; others ignore).
    virtual void logprobs(const TokenLogprobs&, std::string&) {}
    // The HTTP status of a non-streaming answer: 200, except where the API has no way to
    // report an error in a normal body (Anthropic: f.error_status on Finish::Error).
    virtual int status(const FinishInfo&) const { return 200; }
    // A failure after the stream started (prefill error, shutdown): an SSE error event.
    virtual void error_event(const std::string& message, std::string& out) = 0;
    // The ids given to the reply's tool calls so far, in call order (for the tool memory).
    virtual std::vector<std::string> tool_ids() const { return {}; }
    // The response's id when the API names it for later requests (Responses: resp_...).
    virtual std::string response_id() const { return {}; }
};

std::unique_ptr<ApiWriter> make_writer(const Request& req, const ResponseMeta& meta);

// One SSE record: optional "event: NAME" line, then "data: JSON", then a blank line.
std::string sse(const std::string& data, const std::string& event = {});

// The JSON error bodies of §4.10.
std::string openai_error_body(const std::string& message, const std::string& type,
                              const std::string& param = {}, const std::string& code = {});
std::string anthropic_error_body(const std::string& message, const std::string& type);

}  // namespace ds4::server
