#include "turn.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/error.h"
#include "frontend/instance.h"
#include "tokenizer/stream_decoder.h"

namespace ds4::cli {
namespace {

// Writes parser events to stdout; reasoning is dimmed on a terminal (ANSI SGR 2).
// Whether stdout and stderr are the same file (`ds4 -p ... 2>&1 | less`, a log file): then the
// timing line follows the reply in the same stream and the reply must end its line.
bool stdout_is_stderr() {
    struct stat a {}, b {};
    return fstat(STDOUT_FILENO, &a) == 0 && fstat(STDERR_FILENO, &b) == 0 && a.st_dev == b.st_dev &&
           a.st_ino == b.st_ino;
}

class Printer {
public:
    // A terminal, or a stream the timing line also goes to, gets the reply's closing newline;
    // a file or pipe of its own gets the reply's bytes only.
    explicit Printer(bool tty) : tty_(tty), shared_(!tty && stdout_is_stderr()) {}
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
        else if (shared_) std::fputc('\n', stdout);
        dim_ = false;
        std::fflush(stdout);
    }

private:
    bool tty_, shared_;
    bool dim_ = false;
};

}  // namespace

TurnResult run_turn(engine::Engine& e, const std::vector<int32_t>& transcript, const TurnOptions& o) {
    TurnResult r;
    bool shown = false;
    auto progress = [&](int64_t done, int64_t total) {
        if (!o.progress || total <= e.session().options().prefill_chunk) return;
        std::fprintf(stderr, "\rprefill: %lld/%lld tokens (%d%%)", (long long)done, (long long)total,
                     int(100 * done / total));
        std::fflush(stderr);
        shown = true;
    };
    try {
        r.prefill = e.sync(transcript, progress, o.cancel);
    } catch (...) {
        if (shown) std::fputs("\r\x1b[K", stderr);
        throw;
    }
    if (shown) std::fputs("\r\x1b[K", stderr);
    if (r.prefill.cancelled) return r;
    r.prefill_done = true;

    if (!o.format) fail("run_turn: no chat format");
    const std::unique_ptr<chat::StreamParser> parser = o.format->new_parser({.thinking = o.thinking, .tools = false});
    tokenizer::StreamDecoder decoder(e.tokenizer());
    Printer printer(isatty(STDOUT_FILENO) != 0);
    std::vector<chat::OutputEvent> events;
    frontend::DutyCycle duty(o.power);
    r.generation = e.generate({.sampling = o.sampling, .max_tokens = o.max_tokens, .cancel = o.cancel,
                               .max_draft = o.max_draft},
                              [&](int32_t id) {
                                  r.emitted.push_back(id);
                                  events.clear();
                                  parser->feed(decoder.push(id), events);
                                  printer.print(events);
                                  duty.step();
                                  return true;
                              });
    r.usage = e.usage();
    events.clear();
    parser->feed(decoder.flush(), events);
    parser->finish(events);
    printer.print(events);
    printer.end();
    return r;
}

void print_speed(const TurnResult& r) {
    const double pre = r.prefill.seconds > 0 ? double(r.prefill.evaluated) / r.prefill.seconds : 0.0;
    const double gen = r.generation.seconds > 0 && r.generation.emitted > 0
                           ? double(r.generation.emitted) / r.generation.seconds
                           : 0.0;
    std::fprintf(stderr, "prefill: %.2f t/s, generation: %.2f t/s", pre, gen);
    const engine::GeneratorUsage& u = r.usage;
    if (u.drafted > 0)
        std::fprintf(stderr, ", drafts: %lld of %lld accepted (%.0f%%), %.2f tokens per step", (long long)u.accepted,
                     (long long)u.drafted, 100.0 * double(u.accepted) / double(u.drafted),
                     u.steps > 0 ? double(u.emitted) / double(u.steps) : 0.0);
    std::fputc('\n', stderr);
}

}  // namespace ds4::cli
