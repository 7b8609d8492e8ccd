#include "eval/runner.h"

#include <algorithm>
#include <chrono>

#include "chat/format.h"
#include "common/error.h"
#include "eval/grade.h"
#include "tokenizer/stream_decoder.h"

namespace ds4::eval {

const char* to_string(Status s) {
    switch (s) {
        case Status::Pending: return "PENDING";
        case Status::Running: return "RUNNING";
        case Status::Passed: return "PASSED";
        case Status::Failed: return "FAILED";
        case Status::Stopped: return "STOPPED";
        case Status::Error: return "ERROR";
    }
    return "?";
}

const char* to_string(CloseKind k) {
    switch (k) {
        case CloseKind::None: return "none";
        case CloseKind::Natural: return "natural";
        case CloseKind::Soft: return "soft_forced";
        case CloseKind::Hard: return "hard_forced";
    }
    return "?";
}

const char* const kSystemPrompt =
    "You are answering a short test question. Think it through carefully, then give the final answer "
    "in exactly the format the question asks for, on the last line.";

namespace {

// 1 + how many ids score above `id` in `logits` (0: no logits at hand).
int rank_of(std::span<const float> logits, int32_t id) {
    if (id < 0 || size_t(id) >= logits.size()) return 0;
    const float v = logits[size_t(id)];
    int64_t above = 0;
    for (float x : logits) above += x > v;
    return int(std::min<int64_t>(above + 1, 1 << 30));
}

}  // namespace

Runner::Runner(engine::Engine& engine, const chat::ChatFormat& format, RunOptions opt)
    : engine_(engine), format_(format), opt_(std::move(opt)),
      mode_(format.effective_thinking(opt_.thinking, engine.ctx())) {
    if (opt_.system.empty()) opt_.system = kSystemPrompt;
    if (format.markers().think_end < 0) mode_ = chat::ThinkingMode::Off;
}

std::vector<int32_t> render_case(const chat::ChatFormat& format, const Case& c, const std::string& system,
                                 chat::ThinkingMode mode, int64_t ctx) {
    const std::vector<chat::Message> msgs = {{.role = chat::Role::System, .content = system},
                                             {.role = chat::Role::User, .content = question_text(c)}};
    chat::RenderOptions ro;
    ro.thinking = mode;
    ro.context_size = ctx;
    return format.tokenize(format.render(msgs, ro));
}

std::vector<int32_t> Runner::prompt(const Case& c) const {
    return render_case(format_, c, opt_.system, mode_, engine_.ctx());
}

Outcome Runner::run(const Case& c, const std::vector<int32_t>* script, const Sink& sink,
                    const engine::Progress& progress, const std::atomic<bool>* cancel) {
    Outcome o;
    o.question = question_text(c);
    o.thinking = thinking();
    const auto t0 = std::chrono::steady_clock::now();
    try {
        const std::vector<int32_t> p = prompt(c);
        o.prompt_tokens = int64_t(p.size());
        if (o.prompt_tokens + 1 >= engine_.ctx())
            fail("the prompt needs {} tokens but the context holds {} (-c sets a larger one)", p.size(), engine_.ctx());
        if (engine_.sync(p, progress, cancel).cancelled) {
            o.status = Status::Stopped;
        } else {
            generate(o, p, script, sink, cancel);
        }
    } catch (const Error& e) {
        o.status = Status::Error;
        o.error = e.what();
    }
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.status == Status::Pending) {
        o.picked = extract(c, o.output, o.thinking);
        o.status = matches(c, o.picked) ? Status::Passed : Status::Failed;
    }
    return o;
}

// The reply: with reasoning, a first generate() that stops where the reasoning closes (by
// itself or by a budget), then a second one for the answer after it.
void Runner::generate(Outcome& o, const std::vector<int32_t>& prompt, const std::vector<int32_t>* script,
                      const Sink& sink, const std::atomic<bool>* cancel) {
    const int32_t close_id = format_.markers().think_end;
    const int64_t n = std::max<int64_t>(1, std::min(opt_.max_tokens, engine_.ctx() - int64_t(prompt.size()) - 1));
    tokenizer::StreamDecoder dec(engine_.tokenizer());
    std::vector<int32_t> ids;
    bool reasoning = o.thinking;
    const auto emit = [&](int32_t id) {
        ids.push_back(id);
        if (opt_.after_token) opt_.after_token();
        const std::string piece = dec.push(id);
        o.output += piece;
        if (sink && !piece.empty()) sink(piece, reasoning);
        if (id == close_id) reasoning = false;
    };
    engine::GenerateOptions g{.sampling = opt_.sampling, .max_tokens = n, .cancel = cancel, .forced = script,
                              .max_draft = opt_.max_draft};
    engine::GenerateResult r;
    if (o.thinking) {
        g.max_tokens = std::max<int64_t>(1, n - opt_.hard_budget);
        r = engine_.generate(g, [&](int32_t id) {
            const int64_t left = n - int64_t(ids.size());
            if (id == close_id) {
                o.close = {CloseKind::Natural, int64_t(ids.size()), left, 0};
                emit(id);
                return false;
            }
            if (left <= opt_.soft_budget) {
                const int rank = rank_of(engine_.token_logits(), close_id);
                if (rank > 0 && rank <= opt_.close_rank) {
                    o.close = {CloseKind::Soft, int64_t(ids.size()), left, rank};
                    return false;  // </think> takes this token's place
                }
            }
            emit(id);
            return true;
        });
        if (r.reason == engine::StopReason::Length && o.close.kind == CloseKind::None)
            o.close = {CloseKind::Hard, int64_t(ids.size()), n - int64_t(ids.size()), 0};
        if (o.close.kind == CloseKind::Soft || o.close.kind == CloseKind::Hard) emit(close_id);
        const int64_t left = n - int64_t(ids.size());
        if (o.close.kind != CloseKind::None && left > 0 && r.reason != engine::StopReason::Cancelled) {
            // A scripted reply goes on after its own </think> (the rest of its reasoning is dropped).
            std::vector<int32_t> tail;
            if (script) {
                auto at = std::find(script->begin(), script->end(), close_id);
                if (at != script->end()) tail.assign(at + 1, script->end());
            }
            std::vector<int32_t> transcript = prompt;
            transcript.insert(transcript.end(), ids.begin(), ids.end());
            engine_.sync(transcript, {}, nullptr);
            g.max_tokens = left;
            g.forced = script ? &tail : nullptr;
            g.sampling.seed = opt_.sampling.seed + 1;
            r = engine_.generate(g, [&](int32_t id) {
                emit(id);
                return true;
            });
        }
    } else {
        r = engine_.generate(g, [&](int32_t id) {
            emit(id);
            return true;
        });
    }
    const std::string rest = dec.flush();
    o.output += rest;
    if (sink && !rest.empty()) sink(rest, reasoning);
    o.generated = int64_t(ids.size());
    o.stop = r.reason;
    if (r.reason == engine::StopReason::Cancelled) o.status = Status::Stopped;
}

}  // namespace ds4::eval
