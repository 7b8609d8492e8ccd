// ds4-bench: throughput at context frontiers (spec/PRODUCT.md §3.5). Loads the model once, walks a
// fixed token sequence with incremental prefill, probes greedy decode at every frontier from
// a KV snapshot, and reports upstream's CSV columns plus a table on stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_io.h"
#include "frontend/run.h"
#include "frontend/startup.h"
#include "frontend/token_ids.h"
#include "frontier.h"
#include "machine_limits.h"
#include "model/model.h"
#include "ops/matmul.h"
#include "options.h"
#include "report.h"
#include "sweep.h"
#include "tokenizer/tokenizer.h"

namespace ds4::bench {
namespace {

// --limits: the step count of the file, the bandwidth (probed now unless --membw) and the int8
// peak (measured unless --int8-peak), printed before the table.
Limits measure_limits(const Options& o, const gguf::File& file, int threads) {
    Limits l;
    l.count = count_step(file);
    if (o.membw_gbps > 0) {
        l.membw_gbps = o.membw_gbps;
        std::printf("limits: read bandwidth %.2f GB/s (--membw)\n", l.membw_gbps);
    } else {
        const Bandwidth bw = probe_bandwidth(1024, threads, 3);
        l.membw_gbps = bw.gbps;
        std::printf("limits: read bandwidth %.2f GB/s (probed now: 1 GiB, %d threads, median of 3 reads, "
                    "range %.2f-%.2f)\n", bw.gbps, threads, bw.min, bw.max);
    }
    if (o.int8_peak_gops > 0) {
        l.int8_peak_gops = o.int8_peak_gops;
        std::printf("limits: int8 peak %.0f GOP/s (--int8-peak)\n", l.int8_peak_gops);
    } else {
        const Int8Peak p = probe_int8_peak(threads);
        l.int8_peak_gops = p.gops;
        std::printf("limits: %s\n", p.how().c_str());
    }
    const StepCount& c = l.count;
    std::printf("limits: a decode step reads %.0f MB (%.0f MB at context 0), of which %.0f MB routed experts "
                "per row; a prompt token multiplies %.3f G weight values (%.3f GOP)\n",
                c.all() / 1e6, c.at(0) / 1e6, c.routed / 1e6, c.prefill_macs / 1e9, 2 * c.prefill_macs / 1e9);
    return l;
}

// The hooks around each timed decode probe: with --ssd-streaming the probe's own cache counters
// (stderr; the table's gen t/s is the speed-sensitive path, the end-of-run line mixes in the
// prefill), with --profile the probe's weight products (ops/matmul.h), printed under its row.
class ProbeWatch {
public:
    ProbeWatch(streaming::Attachment* streaming, int64_t probe_tokens, bool profile, int threads)
        : streaming_(streaming && streaming->cache() ? streaming : nullptr), probe_tokens_(probe_tokens),
          profile_(profile), threads_(threads) {}
    void attach(SweepOptions& so) {
        if (!streaming_ && !profile_) return;
        so.before_probe = [this] {
            if (streaming_) start_ = streaming_->cache()->stats();
            if (profile_) ops::matvec_profile_open();
            t0_ = std::chrono::steady_clock::now();
        };
        so.after_probe = [this] {
            seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
            if (profile_) last_ = ops::matvec_profile_close();
            if (streaming_)
                std::fprintf(stderr, "%s\n",
                             streaming_->phase_summary("decode probe", start_, probe_tokens_, seconds_).c_str());
        };
    }
    // Under the row of the probe that just ended: its profile per step.
    void print_profile(const Row& r) const {
        if (!profile_ || r.steps <= 0) return;
        std::printf("    profile of the probe, per step (%.2f ms wall, %.2f rows):\n%s",
                    1e3 * seconds_ / double(r.steps), r.drafted > 0 ? r.rows_per_step() : double(r.sessions),
                    ops::matvec_profile_table(last_, double(r.steps), seconds_, threads_, "    ").c_str());
    }

private:
    streaming::Attachment* streaming_;
    int64_t probe_tokens_;
    bool profile_;
    int threads_;
    streaming::CacheStats start_;
    std::chrono::steady_clock::time_point t0_;
    double seconds_ = 0;
    ops::MatvecProfile last_;
};

int run(const Options& o) {
    const std::vector<int32_t> file_ids =
        o.token_ids.empty() ? std::vector<int32_t>{} : frontend::read_token_ids(o.token_ids);
    frontiers(o.shape);  // flag errors before the (slow) load
    frontend::ModelOptions mo = o;
    if (mo.ctx == 0) mo.ctx = context_needed(o.shape);
    // The probe's sequences and the frontier's snapshot; the walk may pass the trained context.
    const frontend::Started started = frontend::start_model(
        mo, {.tool = "ds4-bench", .sequences = o.sessions, .spare = 1, .sequences_flag = "--sessions",
             .check_trained_context = false});
    model::Model& model = *started.model;
    const gguf::File& file = model.file();
    const auto& streaming = started.streaming;

    std::vector<int32_t> ids = file_ids;
    std::string source = o.token_ids;
    if (!o.prompt_file.empty()) {
        std::string text;
        try {
            text = read_file(o.prompt_file);  // a directory is an error, not an empty text
        } catch (const Error& e) {
            fail("--prompt-file {}", e.what());
        }
        ids = tokenizer::Tokenizer::from_gguf(file)->encode(text);
        source = "--prompt-file " + o.prompt_file;
    }
    check_sequence(ids, o.shape, model.info().n_vocab, source);

    SweepOptions so;
    so.shape = o.shape;
    so.session = mo.session();
    so.warmup = o.warmup;
    so.sessions = o.sessions;
    so.spec_depths = o.spec_aid;
    so.spec_accepts = o.spec_aid_accept;
    so.spec_backoff = o.spec_aid_backoff;
    // --mtp / --dspark: one more probe per frontier with the real drafter (its row: aid_accept
    // -1); it uses the generator's back-off as ds4 and ds4-server do.
    const std::unique_ptr<speculative::Speculation> drafters = speculative::Speculation::open(model, o.spec);
    if (drafters) {
        std::printf("speculative decoding: %s\n", drafters->describe().c_str());
        so.new_drafter = [&] { return drafters->new_drafter(mo.sequence()); };
        so.drafter_depth = drafters->max_draft();
    }
    const bool spec = !o.spec_aid.empty() || drafters;
    ProbeWatch watch(streaming.get(), o.shape.gen_tokens * o.sessions, o.profile, started.threads);
    watch.attach(so);
    const char* eos_key = "tokenizer.ggml.eos_token_id";
    if (file.find(eos_key)) so.eos = int32_t(file.get_u32(eos_key));

    std::printf("ds4-bench: %s, %zu tokens, %zu frontiers, %d threads, ctx %lld, prefill chunk %lld%s, "
                "warm-up %lld, %lld session(s) per probe\n",
                o.model.c_str(), ids.size(), frontiers(o.shape).size(), started.threads,
                static_cast<long long>(so.session.ctx), static_cast<long long>(o.prefill_chunk),
                o.qat ? "" : ", no QAT", static_cast<long long>(o.warmup), static_cast<long long>(o.sessions));
    if (spec) {
        std::printf("speculative verification aid: draft depths");
        for (const int64_t d : o.spec_aid) std::printf(" %lld", static_cast<long long>(d));
        std::printf(", each at acceptance");
        for (const double p : o.spec_aid_accept) std::printf(" %g", p);
        std::printf("; outputs checked against plain greedy decoding\n");
    }
    const std::optional<Limits> limits = o.limits ? std::optional<Limits>(measure_limits(o, file, started.threads))
                                                  : std::nullopt;
    CsvWriter csv(o.csv, spec);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> probes(nullptr, &std::fclose);
    if (!o.dump_probe_ids.empty()) {
        probes.reset(std::fopen(o.dump_probe_ids.c_str(), "w"));
        if (!probes) fail("--dump-probe-ids {}: cannot open for writing", o.dump_probe_ids);
    }
    print_table_header(stdout, spec);
    run_sweep(model, ids, so, [&](const Row& r, const std::vector<int32_t>& probe) {
        print_table_row(stdout, r, spec);
        watch.print_profile(r);
        if (limits)
            if (const std::string line = limits_line(r, *limits); !line.empty())
                std::printf("    limits: %s\n", line.c_str());
        csv.add(r);
        if (probes && r.draft_max == 0) {  // the verified probes decode the same ids
            for (size_t i = 0; i < probe.size(); ++i)
                std::fprintf(probes.get(), i ? " %d" : "%d", probe[i]);
            std::fprintf(probes.get(), "\n");
            if (std::fflush(probes.get()) != 0)
                fail("--dump-probe-ids {}: write failed", o.dump_probe_ids);
        }
    });
    return 0;
}

}  // namespace
}  // namespace ds4::bench

int main(int argc, char** argv) {
    const auto parsed = ds4::bench::parse_options(argc, argv);
    if (parsed.exit_code) return *parsed.exit_code;
    return ds4::frontend::run_main("ds4-bench", [&] { return ds4::bench::run(parsed.options); });
}
