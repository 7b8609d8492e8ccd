#include "generate.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "chat/output_parser.h"
#include "common/error.h"
#include "model/model.h"
#include "sampling/sampler.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokens.h"

namespace ds4::cli {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

// Writes parser events to stdout; reasoning is dimmed on a terminal (ANSI SGR 2).
class Printer {
public:
    explicit Printer(bool tty) : tty_(tty) {}
    void print(const std::vector<chat::OutputEvent>& events) {
        for (const auto& e : events) {
            const bool reasoning = e.kind == chat::OutputEvent::Kind::Reasoning;
            if (!reasoning && e.kind != chat::OutputEvent::Kind::Content) continue;
            if (tty_ && reasoning != dim_) {
                std::fputs(reasoning ? "\x1b[2m" : "\x1b[0m", stdout);
                dim_ = reasoning;
            }
            std::fwrite(e.text.data(), 1, e.text.size(), stdout);
        }
        std::fflush(stdout);
    }
    void end() {
        if (tty_) std::fputs(dim_ ? "\x1b[0m\n" : "\n", stdout);
        dim_ = false;
        std::fflush(stdout);
    }

private:
    bool tty_;
    bool dim_ = false;
};

}  // namespace

int run_generate(const Options& o) {
    const std::string user = read_prompt(o);
    auto model = model::Model::load(o.model);
    const auto tok = tokenizer::Tokenizer::from_gguf(model->file());
    if (o.thinking == chat::ThinkingMode::Max &&
        chat::effective_thinking(o.thinking, o.ctx) != chat::ThinkingMode::Max)
        std::fprintf(stderr, "ds4: --think-max needs --ctx >= %lld; thinking as --think\n",
                     (long long)chat::kThinkMaxMinContext);
    const std::vector<int32_t> prompt = one_turn_tokens(*tok, one_turn(o, user));
    if (int64_t(prompt.size()) >= o.ctx)
        fail("the prompt is {} tokens but the context holds {} (raise --ctx)", prompt.size(), o.ctx);

    const int threads = o.threads > 0 ? o.threads : int(std::max(1u, std::thread::hardware_concurrency()));
    model::Session s(*model, {.ctx = o.ctx, .threads = threads, .prefill_chunk = o.prefill_chunk,
                              .qat = o.qat});
    const bool progress = isatty(STDERR_FILENO) != 0;

    // Prefill chunk by chunk so a long prompt shows progress.
    std::vector<float> logits;
    const auto t0 = clock_type::now();
    const size_t chunk = size_t(std::max<int64_t>(1, o.prefill_chunk));
    for (size_t at = 0; at < prompt.size(); at += chunk) {
        const size_t n = std::min(chunk, prompt.size() - at);
        const bool last = at + n == prompt.size();
        s.eval(std::vector<int32_t>(prompt.begin() + at, prompt.begin() + at + n),
               last ? &logits : nullptr);
        if (progress && prompt.size() > chunk)
            std::fprintf(stderr, "\rprefill: %zu/%zu tokens", at + n, prompt.size());
    }
    if (progress && prompt.size() > chunk) std::fputs("\r\x1b[K", stderr);
    const double prefill_s = seconds_since(t0);

    sampling::SamplerParams sp{.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p,
                               .min_p = o.min_p,
                               .seed = o.seed ? *o.seed : (uint64_t(std::random_device{}()) << 32 |
                                                           std::random_device{}())};
    sampling::Sampler sampler(sp);
    const bool thinking = chat::effective_thinking(o.thinking, o.ctx) != chat::ThinkingMode::Off;
    chat::OutputParser parser({.thinking = thinking, .tools = false});
    tokenizer::StreamDecoder decoder(*tok);
    Printer printer(isatty(STDOUT_FILENO) != 0);
    std::vector<chat::OutputEvent> events;

    const int64_t room = o.ctx - s.pos();
    const int64_t limit = o.n_given ? std::min<int64_t>(o.n_predict, room) : room;
    const int32_t eos = tok->special().eos;
    const int64_t V = model->config().n_vocab;
    int64_t generated = 0;
    const auto t1 = clock_type::now();
    while (generated < limit) {
        const int32_t next = sampler.sample(std::span<const float>(logits.data(), size_t(V)));
        if (next == eos) break;
        ++generated;
        events.clear();
        parser.feed(decoder.push(next), events);
        printer.print(events);
        if (generated == limit) break;
        s.eval({next}, &logits);
    }
    const double gen_s = seconds_since(t1);
    events.clear();
    parser.feed(decoder.flush(), events);
    parser.finish(events);
    printer.print(events);
    printer.end();
    if (!o.n_given && generated == room)
        std::fprintf(stderr, "ds4: the context is full (%lld tokens); stopped\n", (long long)o.ctx);
    std::fprintf(stderr, "prefill: %.2f t/s, generation: %.2f t/s\n",
                 double(prompt.size()) / prefill_s, generated > 0 ? double(generated) / gen_s : 0.0);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace ds4::cli
