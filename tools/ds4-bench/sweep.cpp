#include "sweep.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <string>

#include "aid_drafter.h"
#include "common/error.h"
#include "engine/generator.h"

namespace ds4::bench {
namespace {

using clock = std::chrono::steady_clock;

double seconds_since(clock::time_point t0) {
    return std::chrono::duration<double>(clock::now() - t0).count();
}

double process_cpu_seconds() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

// What one decode probe did: its time, sequence 0's generator usage, and every token sequence
// 0 emitted (the chosen first token, then each sampled one: gen_tokens + 1 in all).
struct Probe {
    double seconds = 0, cpu_seconds = 0;
    engine::GeneratorUsage usage;
    std::vector<int32_t> emitted;
};

// The plain probe from the frontier `s` holds (its next-token logits in `logits`): n
// generators, greedy and never EOS, each starting from its own best token; every step is one
// batched call with one row per sequence. Sequences 1..n-1 are clones of s's. `timed`: the
// probe hooks run around it.
Probe plain_probe(model::Model& model, model::Session& s, const std::vector<float>& logits,
                  const SweepOptions& opt, int64_t n, bool timed) {
    const int64_t V = model.info().n_vocab, G = opt.shape.gen_tokens;
    std::vector<std::unique_ptr<model::Sequence>> others;  // sequences 1..n-1
    for (int64_t i = 1; i < n; ++i) others.push_back(s.sequence().clone());
    std::vector<engine::Generator> gens;
    gens.reserve(size_t(n));
    const std::vector<int32_t> firsts = best_non_eos(logits.data(), V, opt.eos, n);
    for (int64_t k = 0; k < n; ++k) {
        auto& g = gens.emplace_back(k == 0 ? s.sequence() : *others[size_t(k - 1)],
                                    engine::GeneratorConfig{.n_vocab = V, .eos = opt.eos});
        g.set_logits(logits);
        g.begin({.sampling = {.temperature = 0}, .ban_eos = true});
        g.choose(firsts[size_t(k)]);
    }
    Probe p;
    p.emitted = {firsts[0]};
    const std::function<bool(int32_t)> record = [&](int32_t id) {
        p.emitted.push_back(id);
        return true;
    };
    const std::function<bool(int32_t)> keep_going = [](int32_t) { return true; };
    std::vector<model::BatchItem> batch(static_cast<size_t>(n));
    if (timed && opt.before_probe) opt.before_probe();
    const auto t0 = clock::now();
    const double c0 = process_cpu_seconds();
    for (int64_t i = 0; i < G; ++i) {
        for (int64_t k = 0; k < n; ++k) {
            const auto rows = gens[size_t(k)].next(1);
            batch[size_t(k)] = rows.item(&gens[size_t(k)].sequence());
        }
        model.eval(batch);
        for (size_t k = 0; k < gens.size(); ++k) {
            gens[k].evaluated();
            const auto stop = gens[k].advance(k == 0 ? record : keep_going);
            if (stop && i + 1 < G)
                fail("decode probe stopped after {} of {} tokens: {}", i + 1, G, engine::to_string(*stop));
        }
    }
    p.seconds = seconds_since(t0);
    p.cpu_seconds = process_cpu_seconds() - c0;
    if (timed && opt.after_probe) opt.after_probe();
    p.usage = gens[0].usage();
    return p;
}

// The same decode as a one-sequence plain probe, through speculative verification: each step
// evaluates the pending token and up to `depth` drafts of `drafter`, and the generator keeps
// the accepted prefix. It stops after the plain probe's gen_tokens + 1 emitted tokens, when
// the sequence holds the same gen_tokens positions.
Probe spec_probe(model::Model& model, model::Session& s, const std::vector<float>& logits,
                 const SweepOptions& opt, int32_t first, engine::Drafter& drafter, int64_t depth, bool backoff) {
    const int64_t V = model.info().n_vocab, G = opt.shape.gen_tokens;
    engine::Generator g(s.sequence(), {.n_vocab = V, .eos = opt.eos, .hidden_size = model.info().hidden_size});
    g.set_drafter(&drafter);
    const engine::DraftNeeds needs = drafter.needs();
    model::Sequence& seq = s.sequence();
    const std::vector<int32_t> held = seq.tokens();
    const int64_t n = int64_t(held.size()), back = std::min(n - 1, needs.tail > 0 ? needs.tail : n - 1);
    if ((needs.hidden || !needs.capture.empty()) && back > 0 && seq.can_rewind(n - back)) {
        // Untimed: the frontier's last rows again, so that the drafter reads them (the same
        // state and logits as the walk's: prefill is bit-identical whatever its chunking).
        seq.rewind(n - back);
        g.set_prompt(held);
        while (!g.ready()) {
            const auto rows = g.next(opt.session.prefill_chunk);
            const model::BatchItem item = rows.item(&seq);
            model.eval(model::Batch(&item, 1));
            g.evaluated();
        }
    } else {
        g.set_logits(logits);
    }
    g.begin({.sampling = {.temperature = 0}, .max_tokens = G + 1, .ban_eos = true, .max_draft = int(depth),
             .draft_backoff = backoff});
    g.choose(first);
    Probe p;
    p.emitted = {first};
    const auto record = [&](int32_t id) {
        p.emitted.push_back(id);
        return true;
    };
    if (opt.before_probe) opt.before_probe();
    const auto t0 = clock::now();
    const double c0 = process_cpu_seconds();
    for (;;) {
        const auto rows = g.next(1);
        const model::BatchItem item = rows.item(&g.sequence());
        model.eval(model::Batch(&item, 1));
        g.evaluated();
        if (const auto stop = g.advance(record)) {
            if (*stop != engine::StopReason::Length)
                fail("speculative probe stopped after {} of {} tokens: {}", p.emitted.size() - 1, G,
                     engine::to_string(*stop));
            break;
        }
    }
    p.seconds = seconds_since(t0);
    p.cpu_seconds = process_cpu_seconds() - c0;
    if (opt.after_probe) opt.after_probe();
    p.usage = g.usage();
    return p;
}

// Verification's promise: the tokens are those of plain greedy decoding.
void check_same(const std::vector<int32_t>& truth, const std::vector<int32_t>& got, int64_t frontier,
                const std::string& what) {
    const size_t n = std::min(truth.size(), got.size());
    const size_t at = size_t(std::mismatch(truth.begin(), truth.begin() + n, got.begin()).first - truth.begin());
    if (at == n && truth.size() == got.size()) return;
    if (at == n)
        fail("{} at frontier {} emitted {} tokens where plain greedy decoding emitted {}", what,
             frontier, got.size(), truth.size());
    fail("{} at frontier {} differs from plain greedy decoding at token {}: {} instead of {}", what,
         frontier, at, got[at], truth[at]);
}

}  // namespace

std::vector<Row> run_sweep(model::Model& model, const std::vector<int32_t>& ids,
                           const SweepOptions& opt, const RowCallback& on_row) {
    const std::vector<int64_t> fronts = frontiers(opt.shape);
    const int64_t need = context_needed(opt.shape), G = opt.shape.gen_tokens;
    if (opt.session.ctx < need)
        fail("--ctx {} is too small: the last frontier {} plus --gen-tokens {} needs {}",
             opt.session.ctx, fronts.back(), G, need);
    if (opt.sessions < 1) fail("--sessions {} must be at least 1", opt.sessions);
    const bool spec = (!opt.spec_depths.empty() || opt.new_drafter) && G > 0;
    if (spec && opt.sessions != 1) fail("--spec-aid and --mtp need --sessions 1 (got {})", opt.sessions);
    if (int64_t(ids.size()) < fronts.back())
        fail("{} tokens to walk, fewer than the last frontier {}", ids.size(), fronts.back());

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
        r.prefill_tps = double(r.prefill_tokens) / seconds_since(t0);
        done = f;
        r.kvcache_bytes = s.state_bytes_used();
        r.gen_tokens = G;
        probe.clear();
        if (G == 0) {
            rows.push_back(r);
            if (on_row) on_row(r, probe);
            continue;
        }
        // Nothing follows the last frontier: no need to come back to it, unless more probes do.
        const auto snap = f == fronts.back() && !spec ? nullptr : s.snapshot();
        std::vector<int32_t> truth;  // the greedy continuation, decoded untimed
        if (spec) {
            truth = plain_probe(model, s, logits, opt, 1, false).emitted;
            s.restore(*snap);
        }
        const Probe plain = plain_probe(model, s, logits, opt, opt.sessions, true);
        r.sessions = opt.sessions;
        r.gen_tps = double(opt.sessions * G) / plain.seconds;
        r.plain_tps = r.gen_tps;
        r.steps = plain.usage.steps;
        r.cpu_seconds = plain.cpu_seconds;
        const auto& held = s.sequence().tokens();
        probe.assign(held.begin() + f, held.end());
        if (spec) check_same(truth, plain.emitted, f, "the plain probe");
        if (snap) s.restore(*snap);
        rows.push_back(r);
        if (on_row) on_row(r, probe);
        if (!spec) continue;
        for (const int64_t depth : opt.spec_depths)
            for (const double accept : opt.spec_accepts) {
                AidDrafter drafter(truth, f, accept, model.info().n_vocab);
                const Probe p = spec_probe(model, s, logits, opt, truth[0], drafter, depth, opt.spec_backoff);
                check_same(truth, p.emitted, f,
                           fmt::format("--spec-aid {} at accept {}", depth, accept));
                s.restore(*snap);
                Row v = r;
                v.gen_tps = double(G) / p.seconds;
                v.cpu_seconds = p.cpu_seconds;
                v.draft_max = depth;
                v.aid_accept = accept;
                v.steps = p.usage.steps;
                v.drafted = p.usage.drafted;
                v.accepted = p.usage.accepted;
                rows.push_back(v);
                if (on_row) on_row(v, probe);
            }
        if (opt.new_drafter) {
            const std::unique_ptr<engine::Drafter> drafter = opt.new_drafter();
            const Probe p = spec_probe(model, s, logits, opt, truth[0], *drafter, opt.drafter_depth, true);
            check_same(truth, p.emitted, f, "the drafter's probe");
            s.restore(*snap);
            Row v = r;
            v.gen_tps = double(G) / p.seconds;
            v.cpu_seconds = p.cpu_seconds;
            v.draft_max = opt.drafter_depth;
            v.aid_accept = -1;
            v.steps = p.usage.steps;
            v.drafted = p.usage.drafted;
            v.accepted = p.usage.accepted;
            rows.push_back(v);
            if (on_row) on_row(v, probe);
        }
    }
    return rows;
}

}  // namespace ds4::bench
