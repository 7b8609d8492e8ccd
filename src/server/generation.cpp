#include "server/generation.h"

#include <chrono>
#include <cstdio>

#include "common/log.h"
#include "server/continuation.h"
#include "sampling/logprobs.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace ds4::server {

StopScanner::StopScanner(std::vector<std::string> stops) : stops_(std::move(stops)) {
    for (const auto& s : stops_) hold_ = std::max(hold_, s.size() - 1);
}

std::string StopScanner::feed(std::string_view text) {
    if (hit_) return {};
    if (stops_.empty()) return std::string(text);
    buf_ += text;
    size_t first = std::string::npos;
    for (const auto& s : stops_) {
        const size_t at = buf_.find(s);
        if (at < first) {
            first = at;
            stop_ = s;
        }
    }
    if (first != std::string::npos) {
        hit_ = true;
        std::string out = buf_.substr(0, first);
        buf_.clear();
        return out;
    }
    if (buf_.size() <= hold_) return {};
    std::string out = buf_.substr(0, buf_.size() - hold_);
    buf_.erase(0, buf_.size() - hold_);
    return out;
}

std::string StopScanner::flush() {
    std::string out;
    if (!hit_) out.swap(buf_);
    return out;
}

namespace {

using clock_type = std::chrono::steady_clock;

uint64_t micros(double seconds) { return uint64_t(seconds * 1e6); }

// Exact tool replay (spec/PRODUCT.md §4.7): each call id of the reply -> the text that the
// history rendering replaces the canonical block with: the whitespace sampled before the block
// opening (the parser keeps it out of the content) and the block through its closing tag.
void remember_tool_block(ToolMemory& memory, const ApiWriter& w, const chat::StreamParser& parser,
                         const std::string& text) {
    const std::string& raw = parser.raw_block();
    const size_t at = text.rfind(raw);
    if (raw.empty() || at == std::string::npos) return;
    const size_t floor = size_t(std::max<int64_t>(parser.content_start(), 0));
    size_t start = at;
    while (start > floor && (text[start - 1] == ' ' || text[start - 1] == '\n' || text[start - 1] == '\t' ||
                             text[start - 1] == '\r'))
        --start;
    const std::string block = text.substr(start, at + raw.size() - start);
    for (const std::string& id : w.tool_ids()) memory.put(id, block);
}

}  // namespace

Generation::Generation(Job& job, const chat::ChatFormat& format, Metrics& metrics)
    : job_(job),
      format_(format),
      metrics_(metrics),
      popt_{.thinking = job.thinking, .tools = !job.request.tools_json.empty(), .tools_json = job.request.tools_json},
      parser_(format.new_parser(popt_)),
      tracker_(job.request.tools_json.empty() ? nullptr : format.new_tool_tracker(job.thinking)),
      decoder_(format.tokenizer()),
      stops_(job.request.stop) {}

void Generation::prefill_progress() {
    if (!job_.request.stream) return;
    const auto now = clock_type::now();
    if (last_keepalive_ == clock_type::time_point{} || now - last_keepalive_ >= std::chrono::seconds(5)) {
        job_.channel->push(": prefill\n\n");
        last_keepalive_ = now;
    }
}

void Generation::fail(const std::string& message, int status) {
    Channel& ch = *job_.channel;
    log::warn("ds4-server: {} failed: {}", to_string(job_.request.api), message);
    if (job_.request.stream) {
        out_.clear();
        job_.writer->error_event(message, out_);
        ch.push(std::move(out_));
        out_.clear();
        ch.close();
    } else {
        ch.push(job_.request.api == Api::Messages
                    ? anthropic_error_body(message, "api_error")
                    : openai_error_body(message, status == 503 ? "server_error" : "http_error"));
        ch.close(status);
    }
}

void Generation::begin(const Usage& usage, double prefill_seconds) {
    usage_ = usage;
    prefill_seconds_ = prefill_seconds;
    started_ = true;
    metrics_.prompt_tokens += uint64_t(usage.prompt);
    metrics_.cached_tokens += uint64_t(usage.cached);
    metrics_.prefill_evaluated += uint64_t(usage.written);
    metrics_.prefill_us += micros(prefill_seconds);
    if (usage.cached > 0) ++metrics_.cache_hits;
    if (prefill_seconds > 0)
        metrics_.last_prefill_tps_milli = int64_t(1000.0 * double(usage.written) / prefill_seconds);
    job_.writer->begin(usage_, out_);
    job_.channel->push(std::move(out_));
    out_.clear();
    // A forced tool choice: the reply's opening is already in the prompt; the parser and the
    // final text see it as if it had been generated.
    if (tracker_) tracker_->feed(job_.reply_prefix);
    deliver(job_.reply_prefix);
    gen_start_ = clock_type::now();
}

void Generation::deliver(const std::string& piece) {
    if (piece.empty()) return;
    text_ += piece;
    events_.clear();
    parser_->feed(piece, events_);
    for (const auto& e : events_) job_.writer->event(e, out_);
    job_.channel->push(std::move(out_));
    out_.clear();
}

bool Generation::token(int32_t id, std::span<const float> logits) {
    ++emitted_;
    // A token counts as reasoning while the parser has not seen </think> before it.
    const bool reasoning = job_.thinking && parser_->content_start() < 0;
    if (reasoning) ++reasoning_;
    ids_.push_back(id);
    const std::string piece = decoder_.push(id);
    if (tracker_) tracker_->feed(piece);
    deliver(stops_.feed(piece));
    if (job_.request.logprobs >= 0 && !reasoning && !logits.empty()) report_logprobs(id, logits);
    return !stops_.hit() && !parser_->block_closed();
}

void Generation::report_logprobs(int32_t id, std::span<const float> logits) {
    const tokenizer::Tokenizer& tok = format_.tokenizer();
    const sampling::LogprobsAt at = sampling::logprobs_at(logits, id, job_.request.logprobs);
    TokenLogprobs t{.token = tok.token_bytes(id), .logprob = at.logprob, .top = {}};
    for (const auto& alt : at.top) t.top.emplace_back(tok.token_bytes(alt.id), alt.logprob);
    job_.writer->logprobs(t, out_);
    job_.channel->push(std::move(out_));
    out_.clear();
}

// A finished reply for later requests (server/continuation.h): a Responses reply under its id
// (unless `store: false`), a Responses or Anthropic reply that called tools under each call id.
void Generation::remember_turn(const FinishInfo& f) {
    const Request& r = job_.request;
    const std::string id = r.api == Api::Responses && r.store ? job_.writer->response_id() : std::string();
    const bool calls = f.reason == Finish::ToolCalls && (r.api == Api::Responses || r.api == Api::Messages);
    if (id.empty() && !calls) return;
    std::vector<int32_t> tokens = job_.prompt;
    tokens.insert(tokens.end(), ids_.begin(), ids_.end());
    const std::vector<std::string> call_ids = job_.writer->tool_ids();
    const std::shared_ptr<const StoredTurn> turn =
        finished_turn(r, f.parsed, call_ids, std::move(tokens), job_.rendered.text + format_.tokenizer().decode(ids_));
    if (!id.empty()) job_.responses->put("resp:" + id, turn);
    if (calls)
        for (const auto& c : call_ids) job_.responses->put("call:" + c, turn);
}

void Generation::finish(engine::StopReason reason) {
    Channel& ch = *job_.channel;
    if (!stops_.hit()) deliver(stops_.feed(decoder_.flush()));
    deliver(stops_.flush());
    events_.clear();
    parser_->finish(events_);
    for (const auto& e : events_) job_.writer->event(e, out_);

    const double gen_seconds = std::chrono::duration<double>(clock_type::now() - gen_start_).count();
    FinishInfo f;
    f.usage = usage_;
    f.usage.completion = emitted_;
    f.usage.reasoning = reasoning_;
    f.parsed = format_.parse(text_, popt_);
    f.reasoning_complete = !job_.thinking || parser_->content_start() >= 0;
    f.stop_sequence = stops_.hit() ? stops_.stop() : std::string();
    if (reason == engine::StopReason::Cancelled) {
        f.reason = Finish::Error;
        f.error = ch.cancel_reason();
        f.error_status = ch.cancel_status();
    } else if (parser_->block_closed() && !parser_->malformed() && !f.parsed.tool_calls.empty()) {
        f.reason = Finish::ToolCalls;
    } else if (parser_->unterminated()) {
        f.reason = Finish::Error;
        f.error = "unterminated tool call";
    } else if (reason == engine::StopReason::Length || reason == engine::StopReason::ContextFull) {
        f.reason = Finish::Length;
    } else {
        f.reason = Finish::Stop;
    }
    if (f.reason == Finish::ToolCalls && job_.tool_memory)
        remember_tool_block(*job_.tool_memory, *job_.writer, *parser_, text_);
    if (job_.responses && f.reason != Finish::Error) remember_turn(f);
    metrics_.generated_tokens += uint64_t(emitted_);
    metrics_.decode_us += micros(gen_seconds);
    if (gen_seconds > 0) metrics_.last_decode_tps_milli = int64_t(1000.0 * double(emitted_) / gen_seconds);
    job_.writer->finish(f, out_);
    ch.push(std::move(out_));
    out_.clear();
    ch.close(job_.writer->status(f));
    // One line per request for the operator (the log: stderr).
    log::info("ds4-server: {} prompt={} cached={} prefill={:.1f} t/s gen={} tokens {:.1f} t/s finish={}{}{}{}{}",
              to_string(job_.request.api), usage_.prompt, usage_.cached,
              prefill_seconds_ > 0 ? double(usage_.written) / prefill_seconds_ : 0.0, emitted_,
              gen_seconds > 0 ? double(emitted_) / gen_seconds : 0.0, to_string(f.reason),
              job_.request.session.empty() ? "" : " session=", job_.request.session,
              f.error.empty() ? "" : " ", f.error);
}

}  // namespace ds4::server
