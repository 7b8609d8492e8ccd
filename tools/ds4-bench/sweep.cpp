#include "sweep.h"

#include <algorithm>
#include <chrono>

#include "common/error.h"
#include "engine/generator.h"

namespace ds4::bench {

std::vector<Row> run_sweep(model::Model& model, const std::vector<int32_t>& ids,
                           const SweepOptions& opt, const RowCallback& on_row) {
    using clock = std::chrono::steady_clock;
    const auto seconds = [](clock::time_point a, clock::time_point b) {
        return std::chrono::duration<double>(b - a).count();
    };
    const std::vector<int64_t> fronts = frontiers(opt.shape);
    const int64_t need = context_needed(opt.shape);
    if (opt.session.ctx < need)
        fail("--ctx {} is too small: the last frontier {} plus --gen-tokens {} needs {}",
             opt.session.ctx, fronts.back(), opt.shape.gen_tokens, need);
    if (opt.sessions < 1) fail("--sessions {} must be at least 1", opt.sessions);
    if (int64_t(ids.size()) < fronts.back())
        fail("{} tokens to walk, fewer than the last frontier {}", ids.size(), fronts.back());
    const int64_t V = model.info().n_vocab;

    // The probe evaluates exactly gen_tokens tokens, up to the last position of --ctx; the
    // generator stops a token earlier (it wants room after the token it emits), so the
    // sequences get one spare position that the walk never fills.
    model::SessionOptions seq_opt = opt.session;
    seq_opt.ctx += 1;
    model::Session s(model, seq_opt);
    std::vector<Row> rows;
    std::vector<float> logits;
    std::vector<int32_t> probe;
    if (opt.warmup > 0) {
        const int64_t n = std::min({opt.warmup, int64_t(ids.size()), opt.session.ctx});
        s.eval(std::vector<int32_t>(ids.begin(), ids.begin() + n), &logits);
        s.reset();
    }
    int64_t done = 0;
    for (const int64_t f : fronts) {
        Row r;
        r.ctx_tokens = f;
        r.prefill_tokens = f - done;
        const std::vector<int32_t> interval(ids.begin() + done, ids.begin() + f);
        const auto t0 = clock::now();
        s.eval(interval, &logits);
        r.prefill_tps = double(r.prefill_tokens) / seconds(t0, clock::now());
        done = f;
        r.kvcache_bytes = s.state_bytes_used();

        probe.clear();
        r.gen_tokens = opt.shape.gen_tokens;
        if (r.gen_tokens > 0) {
            // Nothing follows the last frontier: no need to come back to it.
            const bool last = f == fronts.back();
            const auto snap = last ? nullptr : s.snapshot();
            const int64_t N = opt.sessions;
            r.sessions = N;
            std::vector<std::unique_ptr<model::Sequence>> others;  // sequences 1..N-1
            for (int64_t i = 1; i < N; ++i) others.push_back(s.sequence().clone());
            // One generator per sequence, greedy and never EOS, each starting from its own
            // best token; every step is one batched call with one row per sequence.
            std::vector<engine::Generator> gens;
            gens.reserve(size_t(N));
            const std::vector<int32_t> firsts = best_non_eos(logits.data(), V, opt.eos, N);
            for (int64_t k = 0; k < N; ++k) {
                auto& g = gens.emplace_back(k == 0 ? s.sequence() : *others[size_t(k - 1)],
                                            engine::GeneratorConfig{.n_vocab = V, .eos = opt.eos});
                g.set_logits(logits);
                g.begin({.sampling = {.temperature = 0}, .ban_eos = true});
                g.choose(firsts[size_t(k)]);
            }
            std::vector<model::BatchItem> batch(static_cast<size_t>(N));
            const auto keep_going = [](int32_t) { return true; };
            if (opt.before_probe) opt.before_probe();
            const auto t1 = clock::now();
            for (int64_t i = 0; i < r.gen_tokens; ++i) {
                for (int64_t k = 0; k < N; ++k) {
                    const auto rows = gens[size_t(k)].next(1);
                    batch[size_t(k)] = rows.item(&gens[size_t(k)].sequence());
                }
                model.eval(batch);
                for (auto& g : gens) {
                    g.evaluated();
                    const auto stop = g.advance(keep_going);
                    if (stop && i + 1 < r.gen_tokens)
                        fail("decode probe stopped after {} of {} tokens: {}", i + 1, r.gen_tokens,
                             engine::to_string(*stop));
                }
            }
            r.gen_tps = double(N * r.gen_tokens) / seconds(t1, clock::now());
            if (opt.after_probe) opt.after_probe();
            const auto& held = s.sequence().tokens();
            probe.assign(held.begin() + f, held.end());
            if (snap) s.restore(*snap);
        }
        rows.push_back(r);
        if (on_row) on_row(r, probe);
    }
    return rows;
}

}  // namespace ds4::bench
