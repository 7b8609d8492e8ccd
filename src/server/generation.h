// One request's output (spec/PRODUCT.md §4.6, §4.9, §4.10), fed one token at a time by the
// scheduler: detokenized with StreamDecoder, cut at stop sequences (the last max_len - 1 bytes
// are held back until decided), parsed by the chat format's parser into reasoning / content /
// tool calls and handed to the API writer, whose bytes go to the job's Channel. Generation stops at the end of
// a tool-call block. Finish: tool_calls after a complete block, error for an unterminated block
// or a cancel, length at the token limit or a full context, else stop.
#pragma once

#include <chrono>
#include <span>
#include <string>
#include <vector>

#include <memory>

#include "chat/format.h"
#include "engine/engine.h"
#include "server/job.h"
#include "server/metrics.h"
#include "tokenizer/stream_decoder.h"

namespace ds4::server {

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

class Generation {
public:
    // `format` (and its tokenizer) outlive the generation.
    Generation(Job& job, const chat::ChatFormat& format, Metrics& metrics);

    // A keepalive SSE comment while the prompt is evaluated (at most every 5 s).
    void prefill_progress();
    // The prompt is evaluated: the response starts.
    void begin(const Usage& usage, double prefill_seconds);
    // A sampled id (never EOS) and the logits it was sampled from (for the request's logprobs;
    // may be empty when none were asked). False when generation must stop after it (a stop
    // sequence, the end of a tool-call block).
    bool token(int32_t id, std::span<const float> logits = {});
    // The end: the last events, the finish record, the channel closed; one log line.
    void finish(engine::StopReason reason);
    // A failure (before or after begin()): HTTP error or SSE error event; the channel closed.
    void fail(const std::string& message, int status = 500);

    int64_t emitted() const { return emitted_; }
    bool started() const { return started_; }
    // Inside a tool-call block (no continued checkpoint is taken there).
    bool in_tool_block() const { return parser_->block_started() && !parser_->block_closed(); }
    // The next token is tool-call structure: DSML-aware sampling takes the argmax
    // (chat/tool_tracker.h; only when the request has tools).
    bool structural() const { return tracker_ && tracker_->structural(); }

private:
    void report_logprobs(int32_t id, std::span<const float> logits);
    void remember_turn(const FinishInfo& f);
    void deliver(const std::string& piece);

    Job& job_;
    const chat::ChatFormat& format_;
    Metrics& metrics_;
    chat::OutputParserOptions popt_;
    std::unique_ptr<chat::StreamParser> parser_;
    std::unique_ptr<chat::ToolTracker> tracker_;  // null: no tools
    std::vector<int32_t> ids_;                     // every sampled id (the live session's reply)
    tokenizer::StreamDecoder decoder_;
    StopScanner stops_;
    Usage usage_;
    std::string text_;  // everything shown, for the final parse
    std::string out_;
    std::vector<chat::OutputEvent> events_;
    int64_t emitted_ = 0;
    int64_t reasoning_ = 0;  // emitted before the end of the reasoning
    bool started_ = false;
    double prefill_seconds_ = 0;
    std::chrono::steady_clock::time_point gen_start_{}, last_keepalive_{};
};

}  // namespace ds4::server
