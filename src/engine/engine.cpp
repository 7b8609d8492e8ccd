#include "engine/engine.h"

#include <algorithm>
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

const char* to_string(StopReason r) {
    switch (r) {
        case StopReason::Eos: return "eos";
        case StopReason::Length: return "length";
        case StopReason::ContextFull: return "context_full";
        case StopReason::Cancelled: return "cancelled";
        case StopReason::Caller: return "caller";
        case StopReason::ForcedEnd: return "forced_end";
    }
    return "?";
}

Engine::Engine(model::Model& model, const tokenizer::Tokenizer& tok, model::SessionOptions opt)
    : model_(model), tok_(tok), session_(model, opt) {}

SyncResult Engine::sync(const std::vector<int32_t>& tokens, const Progress& progress,
                        const std::atomic<bool>* cancel) {
    const int64_t n = int64_t(tokens.size());
    if (n == 0) fail("nothing to evaluate: the prompt is empty");
    if (n >= ctx())
        fail("context exceeded: the prompt is {} tokens but the context holds {} (including the "
             "reply)", n, ctx());
    const int64_t V = model_.info().n_vocab;
    for (int32_t t : tokens)
        if (t < 0 || t >= V) fail("token id {} out of range [0, {})", t, V);

    SyncResult r;
    int64_t keep = session_.common_prefix(tokens);
    if (keep == n && logits_pos_ == n && session_.pos() == n) {
        r.reused = n;
        return r;
    }
    keep = std::min(keep, n - 1);  // the last position is evaluated again for its logits
    const auto t0 = clock_type::now();
    if (keep < session_.pos()) session_.truncate(keep);
    logits_pos_ = -1;
    r.reused = keep;
    const int64_t chunk = std::max<int64_t>(1, session_.options().prefill_chunk);
    for (int64_t at = keep; at < n; at += chunk) {
        if (at > keep && cancelled(cancel)) {
            r.cancelled = true;
            break;
        }
        const int64_t len = std::min(chunk, n - at);
        const bool last = at + len == n;
        session_.eval(std::vector<int32_t>(tokens.begin() + at, tokens.begin() + at + len),
                      last ? &logits_ : nullptr);
        r.evaluated += len;
        if (last) logits_pos_ = n;
        if (progress) progress(r.evaluated, n - keep);
    }
    r.seconds = seconds_since(t0);
    return r;
}

GenerateResult Engine::generate(const GenerateOptions& opt,
                                const std::function<bool(int32_t)>& on_token) {
    if (logits_pos_ != session_.pos()) fail("generate() needs a sync() first");
    sampling::Sampler sampler(opt.sampling);
    const int32_t eos = tok_.special().eos;
    const size_t V = size_t(model_.info().n_vocab);
    GenerateResult r;
    const auto t0 = clock_type::now();
    size_t forced_at = 0;
    for (;;) {
        if (r.emitted >= opt.max_tokens) { r.reason = StopReason::Length; break; }
        if (cancelled(opt.cancel)) { r.reason = StopReason::Cancelled; break; }
        int32_t id;
        if (opt.forced) {
            if (forced_at == opt.forced->size()) { r.reason = StopReason::ForcedEnd; break; }
            id = (*opt.forced)[forced_at++];
        } else {
            id = sampler.sample(std::span<const float>(logits_.data(), V));
        }
        if (id == eos) { r.reason = StopReason::Eos; break; }
        ++r.emitted;
        if (!on_token(id)) { r.reason = StopReason::Caller; break; }
        if (r.emitted >= opt.max_tokens) { r.reason = StopReason::Length; break; }
        // The emitted token needs a position, and the one after it room to be emitted.
        if (session_.pos() + 1 >= ctx()) { r.reason = StopReason::ContextFull; break; }
        session_.eval({id}, &logits_);
        logits_pos_ = session_.pos();
    }
    r.seconds = seconds_since(t0);
    return r;
}

}  // namespace ds4::engine

namespace ds4::engine {

std::vector<uint8_t> Engine::save_state() const {
    const bool ready = logits_pos_ == session_.pos() && session_.pos() > 0;
    return model_.save_state(session_.sequence(), ready ? std::span<const float>(logits_) : std::span<const float>());
}

void Engine::load_state(std::span<const uint8_t> bytes) {
    std::vector<float> logits;
    model_.load_state(bytes, session_.sequence(), &logits);
    logits_ = std::move(logits);
    logits_pos_ = logits_.empty() ? -1 : session_.pos();
}

}  // namespace ds4::engine
