#include "engine/engine.h"

#include <chrono>
#include <span>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace ds4::engine {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

bool cancelled(const std::atomic<bool>* c) { return c && c->load(std::memory_order_relaxed); }

}  // namespace

Engine::Engine(model::Model& model, const tokenizer::Tokenizer& tok, model::SessionOptions opt,
               std::vector<int32_t> stop_ids)
    : model_(model), tok_(tok), session_(model, opt),
      gen_(session_.sequence(), {.n_vocab = model.info().n_vocab,
                                 .eos = tok.special().eos,
                                 .stop_ids = std::move(stop_ids),
                                 .hidden_size = model.info().hidden_size}) {}

void Engine::eval(const Generator::Rows& rows) {
    const model::BatchItem item = rows.item(&session_.sequence());
    model_.eval(model::Batch(&item, 1));
    gen_.evaluated();
}

SyncResult Engine::sync(const std::vector<int32_t>& tokens, const Progress& progress,
                        const std::atomic<bool>* cancel) {
    SyncResult r;
    const auto t0 = clock_type::now();
    r.reused = gen_.set_prompt(tokens);
    const int64_t todo = int64_t(tokens.size()) - r.reused;
    const int64_t chunk = session_.options().prefill_chunk;
    while (!gen_.ready()) {
        if (r.evaluated > 0 && cancelled(cancel)) {
            r.cancelled = true;
            break;
        }
        const Generator::Rows rows = gen_.next(chunk);
        eval(rows);
        r.evaluated += int64_t(rows.tokens.size());
        if (progress) progress(r.evaluated, todo);
    }
    if (r.evaluated > 0) r.seconds = seconds_since(t0);
    return r;
}

GenerateResult Engine::generate(const GenerateOptions& opt,
                                const std::function<bool(int32_t)>& on_token) {
    if (!gen_.ready()) fail("generate() needs a sync() first");
    gen_.begin(opt);
    GenerateResult r;
    const auto t0 = clock_type::now();
    for (;;) {
        if (const auto stop = gen_.advance(on_token)) {
            r.reason = *stop;
            break;
        }
        eval(gen_.next(session_.options().prefill_chunk));
    }
    r.emitted = gen_.usage().emitted;
    r.seconds = seconds_since(t0);
    return r;
}

std::vector<uint8_t> Engine::save_state() const { return gen_.save_state(model_); }

bool Engine::load_state(std::span<const uint8_t> bytes) { return gen_.load_state(model_, bytes); }

}  // namespace ds4::engine
