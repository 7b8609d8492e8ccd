#include "server/generation.h"

#include <chrono>
#include <cstdio>

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
void remember_tool_block(ToolMemory& memory, const ApiWriter& w, const chat::OutputParser& parser,
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

void run_job(engine::Engine& engine, Job& job, Metrics& metrics) {
    Channel& ch = *job.channel;
    ApiWriter& w = *job.writer;
    const bool stream = job.request.stream;
    std::string out;
    auto fail_job = [&](const std::string& message, int status = 500) {
        std::fprintf(stderr, "ds4-server: %s failed: %s\n", to_string(job.request.api), message.c_str());
        if (stream) {
            out.clear();
            w.error_event(message, out);
            ch.push(std::move(out));
            ch.close();
        } else {
            ch.push(job.request.api == Api::Messages ? anthropic_error_body(message, "api_error")
                                                     : openai_error_body(message, status == 503 ? "server_error" : "http_error"));
            ch.close(status);
        }
    };
    if (ch.cancel) {  // the client left (or the server stops, or time ran out) while queued
        fail_job(ch.cancel_reason(), ch.cancel_status());
        return;
    }

    // Prefill, with a keepalive comment at the first chunk and then every 5 s.
    auto last_keepalive = clock_type::time_point{};
    auto progress = [&](int64_t, int64_t) {
        if (!stream) return;
        const auto now = clock_type::now();
        if (last_keepalive == clock_type::time_point{} || now - last_keepalive >= std::chrono::seconds(5)) {
            ch.push(": prefill\n\n");
            last_keepalive = now;
        }
    };
    engine::SyncResult sync;
    try {
        sync = engine.sync(job.prompt, progress, &ch.cancel);
    } catch (const std::exception& e) {
        fail_job(std::string("prefill failed: ") + e.what());
        return;
    }
    if (sync.cancelled) {
        fail_job(ch.cancel_reason() + " during prefill", ch.cancel_status());
        return;
    }
    Usage usage{.prompt = int64_t(job.prompt.size()), .cached = sync.reused, .written = sync.evaluated};
    metrics.prompt_tokens += uint64_t(usage.prompt);
    metrics.cached_tokens += uint64_t(usage.cached);
    metrics.prefill_evaluated += uint64_t(usage.written);
    metrics.prefill_us += micros(sync.seconds);
    if (sync.reused > 0) ++metrics.cache_hits;
    if (sync.seconds > 0) metrics.last_prefill_tps_milli = int64_t(1000.0 * double(sync.evaluated) / sync.seconds);

    w.begin(usage, out);
    ch.push(std::move(out));
    out.clear();

    const bool tools = !job.request.tools_json.empty();
    chat::OutputParserOptions popt{.thinking = job.thinking, .tools = tools};
    chat::OutputParser parser(popt);
    tokenizer::StreamDecoder decoder(engine.tokenizer());
    StopScanner stops(job.request.stop);
    std::string text;  // everything shown, for the final parse
    std::vector<chat::OutputEvent> events;
    auto deliver = [&](const std::string& piece) {
        if (piece.empty()) return;
        text += piece;
        events.clear();
        parser.feed(piece, events);
        for (const auto& e : events) w.event(e, out);
        ch.push(std::move(out));
        out.clear();
    };

    // A forced tool choice: the reply's opening is already in the prompt; the parser and the
    // final text see it as if it had been generated.
    deliver(job.reply_prefix);

    engine::GenerateOptions gopt;
    gopt.sampling = job.request.sampling;
    gopt.max_tokens = job.max_tokens;
    gopt.cancel = &ch.cancel;
    if (job.forced) gopt.forced = &*job.forced;
    engine::GenerateResult gen;
    int64_t reasoning_tokens = 0;
    try {
        gen = engine.generate(gopt, [&](int32_t id) {
            // A token counts as reasoning while the parser has not seen </think> before it.
            if (job.thinking && parser.content_start() < 0) ++reasoning_tokens;
            deliver(stops.feed(decoder.push(id)));
            return !stops.hit() && !parser.block_closed();
        });
    } catch (const std::exception& e) {
        fail_job(std::string("generation failed: ") + e.what());
        return;
    }
    if (!stops.hit()) deliver(stops.feed(decoder.flush()));
    deliver(stops.flush());
    events.clear();
    parser.finish(events);
    for (const auto& e : events) w.event(e, out);

    FinishInfo f;
    f.usage = usage;
    f.usage.completion = gen.emitted;
    f.usage.reasoning = reasoning_tokens;
    f.parsed = chat::parse_output(text, popt);
    f.reasoning_complete = !job.thinking || parser.content_start() >= 0;
    f.stop_sequence = stops.hit() ? stops.stop() : std::string();
    if (gen.reason == engine::StopReason::Cancelled) {
        f.reason = Finish::Error;
        f.error = ch.cancel_reason();
        f.error_status = ch.cancel_status();
    } else if (parser.block_closed() && !parser.malformed() && !f.parsed.tool_calls.empty()) {
        f.reason = Finish::ToolCalls;
    } else if (parser.unterminated()) {
        f.reason = Finish::Error;
        f.error = "unterminated tool call";
    } else if (gen.reason == engine::StopReason::Length || gen.reason == engine::StopReason::ContextFull) {
        f.reason = Finish::Length;
    } else {
        f.reason = Finish::Stop;
    }
    if (f.reason == Finish::ToolCalls && job.tool_memory) remember_tool_block(*job.tool_memory, w, parser, text);
    metrics.generated_tokens += uint64_t(gen.emitted);
    metrics.decode_us += micros(gen.seconds);
    if (gen.seconds > 0) metrics.last_decode_tps_milli = int64_t(1000.0 * double(gen.emitted) / gen.seconds);
    w.finish(f, out);
    ch.push(std::move(out));
    ch.close(w.status(f));
    // One line per request for the operator (stderr).
    std::fprintf(stderr,
                 "ds4-server: %s prompt=%lld cached=%lld prefill=%.1f t/s gen=%lld tokens %.1f t/s "
                 "finish=%s%s%s\n",
                 to_string(job.request.api), (long long)usage.prompt, (long long)usage.cached,
                 sync.seconds > 0 ? double(sync.evaluated) / sync.seconds : 0.0, (long long)gen.emitted,
                 gen.seconds > 0 ? double(gen.emitted) / gen.seconds : 0.0, to_string(f.reason),
                 f.error.empty() ? "" : " ", f.error.c_str());
}

}  // namespace ds4::server
