#include "common/version.h"
#include "options.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "common/cli_checks.h"

namespace ds4::bench {

ParseResult parse_options(int argc, char** argv) {
    ParseResult r;
    Options& o = r.options;
    CLI::App app{"ds4-bench: prefill and decode throughput at growing context frontiers (DwarfStar "
                 "C++)", "ds4-bench"};
    ds4::add_version_flag(app, "ds4-bench");
    app.get_formatter()->column_width(30);
    auto* prompt = app.add_option("--prompt-file", o.prompt_file,
                                  "Text to walk, tokenized raw (no BOS, no chat template); needs "
                                  "a model with a vocabulary")
                       ->option_text("FILE")->group("Token sequence (one is required)");
    auto* ids = app.add_option("--token-ids", o.token_ids,
                               "Whitespace-separated token ids to walk, used as they are (works "
                               "for models without a vocabulary)")
                    ->option_text("FILE")->group("Token sequence (one is required)");
    prompt->excludes(ids);
    auto& s = o.shape;
    app.add_option("--ctx-start", s.ctx_start, "First frontier in tokens (default 2048)")
        ->group("Frontiers");
    app.add_option("--ctx-max", s.ctx_max,
                   "Last frontier at most (default 32768); the sequence must hold that many "
                   "tokens (it is not repeated)")
        ->group("Frontiers");
    app.add_option("--step-incr", s.step_incr, "Distance between frontiers (default 2048)")
        ->group("Frontiers");
    app.add_option("--gen-tokens", s.gen_tokens,
                   "Tokens of the greedy decode probe at each frontier (default 128; 0: prefill "
                   "only)")
        ->group("Frontiers");
    app.add_option("--sessions", o.sessions,
                   "Sequences decoding together in each probe (default 1): the frontier's state "
                   "copied to each, sequence i starting from the (i+1)-th best token, one batched "
                   "call per step; gen t/s is their aggregate")
        ->check(CLI::Range(int64_t(1), int64_t(256)))->group("Frontiers");
    app.add_option("--csv", o.csv,
                   "Write ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes,"
                   "sessions, one row per frontier")
        ->option_text("OUT")->group("Output");
    auto* limits = app.add_flag("--limits", o.limits,
                 "After each row, its distance from the machine's limits: decode bytes per step x "
                 "steps/s against the read bandwidth (probed before the walk: 1 GiB, 3 reads), "
                 "prefill weight ops per token x t/s against the int8 peak, and with --sessions N "
                 "the bytes a step must read and the memory-bound ceiling")
        ->group("Output");
    app.add_option("--membw", o.membw_gbps, "With --limits: the read bandwidth in GB/s instead of probing it")
        ->option_text("GBPS")->check(CLI::PositiveNumber)->needs(limits)->group("Output");
    app.add_option("--int8-peak", o.int8_peak_gops,
                   "With --limits: the int8 peak in GOP/s instead of measuring it")
        ->option_text("GOPS")->check(CLI::PositiveNumber)->needs(limits)->group("Output");
    app.add_flag("--profile", o.profile,
                 "After each row, where its decode probe's time went: per weight format and "
                 "activation rows per call (1 in decode, N with --sessions N, up to depth + 1 "
                 "with --spec-aid), MB read and thread ms per step, GB/s of weights and GMAC/s "
                 "per thread, then the parallel regions' wall time against the step's")
        ->group("Output");
    app.add_option("--dump-probe-ids", o.dump_probe_ids,
                   "Write each probe's greedy token ids, one line per frontier (diagnostics)")
        ->option_text("FILE")->group("Output");
    auto* aid = app.add_option("--spec-aid", o.spec_aid,
                   "Measure speculative verification: at each frontier, after the plain probe, "
                   "decode the same tokens again with a drafter that proposes N tokens per step "
                   "from the known greedy continuation (one probe per N of the list, e.g. 1,2,3); "
                   "the output must equal the plain probe's")
        ->option_text("N[,N...]")->delimiter(',')->check(CLI::Range(int64_t(1), int64_t(256)))
        ->group("Speculative verification");
    app.add_option("--spec-aid-accept", o.spec_aid_accept,
                   "The chance that each draft token of --spec-aid is right (a wrong one is "
                   "another id, decided per position), one probe per value (default 1; e.g. "
                   "1,0.5,0)")
        ->option_text("P[,P...]")->delimiter(',')->check(CLI::Range(0.0, 1.0))->needs(aid)
        ->group("Speculative verification");
    speculative::add_flags(app, o.spec, "Speculative decoding");
    app.add_flag("--spec-aid-backoff", o.spec_aid_backoff,
                 "Verified probes use the generator's draft back-off (after a step whose drafts were "
                 "all rejected, skip drafting for 1, 2, 4 ... 32 steps), as ds4 and ds4-server do; "
                 "without it every step verifies drafts (the raw cost of verification)")
        ->needs(aid)
        ->group("Speculative verification");
    frontend::add_model_flags(app, o,
                              {.group = "Runtime",
                               .ctx_names = "-c,--ctx,--ctx-alloc",
                               .ctx_help = "Positions to allocate (default: the last frontier + --gen-tokens)",
                               .ctx_min = 0});
    app.add_option("--warmup", o.warmup,
                   "Before the sweep, prefill the sequence's first N tokens untimed and reset the "
                   "session, so the timed rows run on grown buffers (default 0: none)")
        ->check(cli_checks::at_least(0))->group("Runtime");
    streaming::add_flags(app, o.streaming, "SSD streaming");
    pipeline::add_dist_flags(app, o.dist);
    app.footer(
        "Each row prefills only the tokens since the previous frontier (prefill_tokens) and times\n"
        "them; then, from a snapshot of the KV state, it times a greedy decode of --gen-tokens\n"
        "tokens (an EOS argmax takes the next best token), and restores the snapshot.\n"
        "Examples:\n"
        "  ds4-bench -m ds4flash.gguf --prompt-file speed-bench/promessi_sposi.txt --csv out.csv\n"
        "  ds4-bench -m models/flash4.gguf --token-ids ids.txt --ctx-start 512 --ctx-max 4096 \\\n"
        "            --step-incr 512 --gen-tokens 32 --threads 2 --csv out.csv\n"
        "  bench/plot_speed.py out.csv --title \"my machine\" > out.svg\n"
        "With --spec-aid the probe first decodes untimed (the greedy continuation), then plainly\n"
        "(timed), then with the aid's drafts per depth and acceptance; rows add draft_max,\n"
        "aid_accept, steps, drafted, accepted, per-step rates, x_plain (t/s over the plain\n"
        "probe's at the same frontier) and cpu_ms_per_step.");
    if ((r.exit_code = frontend::parse(app, argc, argv, o))) return r;
    if (const std::string e = speculative::flag_error(o.spec); !e.empty()) {
        std::fprintf(stderr, "ds4-bench: %s\n", e.c_str());
        r.exit_code = 2;
        return r;
    }
    if (o.prompt_file.empty() && o.token_ids.empty()) {
        std::fprintf(stderr, "ds4-bench: give the sequence to walk: --prompt-file FILE or "
                             "--token-ids FILE (see --help)\n");
        r.exit_code = 2;
    } else if (!o.spec_aid.empty() && (o.sessions != 1 || o.shape.gen_tokens == 0)) {
        std::fprintf(stderr, "ds4-bench: --spec-aid needs --sessions 1 and --gen-tokens above 0\n");
        r.exit_code = 2;
    }
    return r;
}

}  // namespace ds4::bench
