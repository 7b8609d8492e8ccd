// ds4-server: the OpenAI / Anthropic compatible HTTP server (spec/PRODUCT.md §3.3, §4, §9.2).
// One model, --parallel N live sequences (slots) advanced together in batched evaluations;
// requests queue for a free slot (src/server/scheduler.h).
#include <CLI/CLI.hpp>

#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>

#include "common/version.h"
#include "common/cli_checks.h"
#include "common/error.h"
#include "frontend/run.h"
#include "frontend/startup.h"
#include "model/model.h"
#include "server/http_server.h"
#include "speculative/options.h"
#include "tokenizer/tokenizer.h"

namespace {

// -m, -t, --ctx (here 32768, or the model's trained context when that is smaller and no -c was
// given), --prefill-chunk, --no-qat, --no-mmap, SSD streaming and --role coordinator (the model
// runs over a pipeline) come from ModelOptions.
struct Options : ds4::frontend::ModelOptions {
    Options() { ctx = 32768; }
    long long rewind_slack = 4096;
    ds4::server::ServerOptions server;
    ds4::speculative::SpecOptions spec;
    std::string force_output;
};

// Seconds in [lo, hi], said in plain numbers; CLI::Range would let "nan" through.
CLI::Validator seconds_in(double lo, double hi) {
    return CLI::Validator(
        [lo, hi](std::string& text) -> std::string {
            double v = 0;
            size_t used = 0;
            try {
                v = std::stod(text, &used);
            } catch (const std::exception&) {
                used = 0;
            }
            if (used == 0 || used != text.size() || !std::isfinite(v) || v < lo || v > hi)
                return fmt::format("'{}' is not a number of seconds from {} to {}", text, lo, hi);
            return {};
        },
        fmt::format("SECONDS in [{} - {}]", lo, hi));
}

// Signals only set a flag; a watcher thread does the (non-async-signal-safe) shutdown.
std::atomic<int> g_signal{0};
std::atomic<bool> g_again{false};  // a second signal cuts the drain short
extern "C" void on_signal(int sig) {
    if (g_signal.load() > 0) g_again = true;
    else g_signal = sig;
}

int run(const Options& o) {
    if (!o.model_given && !std::filesystem::exists(o.model))
        ds4::fail("model file {} not found; pass -m FILE (scripts/run-default.sh writes a small "
                  "random model to models/default.gguf)", o.model);
    // Every slot's KV state (and a snapshot's) comes before the expert cache.
    const ds4::frontend::Started started = ds4::frontend::start_model(
        o, {.tool = "ds4-server", .sequences = o.server.scheduler.parallel, .spare = 1,
            .sequences_flag = "--parallel", .tokenizer = true, .fit_trained_context = true});
    ds4::model::Model& model = *started.model;
    const ds4::tokenizer::Tokenizer& tok = *started.tokenizer;
    const long long ctx = started.ctx;
    const int threads = started.threads;
    ds4::server::ServerOptions server_options = o.server;
    server_options.scheduler.session = {.ctx = ctx, .prefill_chunk = o.prefill_chunk, .qat = o.qat,
                                        .rewind_slack = o.rewind_slack};
    // Speculative decoding: one drafter per slot, over a head that outlives the server.
    const std::unique_ptr<ds4::speculative::Speculation> spec = ds4::speculative::Speculation::open(model, o.spec);
    if (spec) {
        std::fprintf(stderr, "ds4-server: speculative decoding: %s\n", spec->describe().c_str());
        server_options.scheduler.new_drafter = [s = spec.get()](const ds4::model::SequenceOptions& seq) {
            return s->new_drafter(seq);
        };
        server_options.scheduler.max_draft = spec->max_draft();
    }
    std::unique_ptr<ds4::server::ForcedOutputs> forced;
    if (!o.force_output.empty()) {
        forced = std::make_unique<ds4::server::ForcedOutputs>(o.force_output, tok);
        std::fprintf(stderr, "ds4-server: TEST MODE: outputs are forced from %s\n", o.force_output.c_str());
    }
    ds4::server::HttpServer server(model, tok, server_options, std::move(forced));
    // Said before binding, so it is seen even when the bind fails.
    if (!ds4::server::is_loopback_host(o.server.host) && o.server.api_key.empty())
        std::fprintf(stderr,
                     "ds4-server: WARNING: listening on %s, which is not a loopback address, without "
                     "--api-key: anyone who can reach it can use the model\n",
                     o.server.host.c_str());
    const int port = server.bind();
    // Before the listening line: a test (or a supervisor) may signal as soon as it sees it.
    std::signal(SIGPIPE, SIG_IGN);
    std::signal(SIGINT, on_signal);
    std::signal(SIGTERM, on_signal);
    std::signal(SIGHUP, on_signal);  // a closed terminal: stop gracefully too

    std::fprintf(stderr, "ds4-server: context %lld tokens, %d slot%s, %d threads, model %s\n", ctx,
                 server_options.scheduler.parallel, server_options.scheduler.parallel == 1 ? "" : "s",
                 threads, o.model.c_str());
    std::fprintf(stderr, "ds4-server: listening on http://%s:%d\n",
                 o.server.host == "localhost" ? "127.0.0.1" : o.server.host.c_str(), port);
    std::fflush(stderr);

    std::thread watcher([&] {
        while (g_signal == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (g_signal > 0) {
            std::fprintf(stderr, "ds4-server: signal %d: shutting down\n", g_signal.load());
            // Accepted requests may finish first (--drain-timeout); /health says 503 meanwhile.
            server.drain(o.server.drain_timeout_s, &g_again);
            server.stop();
        }
    });
    server.run();
    if (g_signal == 0) g_signal = -1;  // run() ended on its own: release the watcher
    watcher.join();
    server.stop();
    std::fprintf(stderr, "ds4-server: stopped\n");
    return 0;
}

// The end of --help: routes, thinking, examples.
constexpr const char* kFooter =
    "Limits and security: docs/SERVER.md.\n"
    "Routes: GET /health /ready /metrics /v1/models /v1/models/{id}; POST /v1/chat/completions\n"
    "/v1/completions /v1/messages /v1/responses (docs/SERVER.md).\n"
    "Thinking is on by default (high effort); reasoning_effort=none, thinking={type:disabled},\n"
    "think=false or model=deepseek-chat turn it off. Client sampling knobs apply only when\n"
    "thinking is off.\n"
    "Examples:\n"
    "  ds4-server -m ds4flash.gguf --ctx 100000\n"
    "  ds4-server -m big.gguf --ssd-streaming --ssd-streaming-cache-experts 16GB\n"
    "  ds4-server -m ds4flash.gguf --parallel 4 --mtp mtp.gguf (docs/SPECULATIVE.md)\n"
    "  ds4-server -m M --role coordinator --layers 0:21 --listen 0.0.0.0 4000 (docs/DISTRIBUTED.md)\n"
    "  curl http://127.0.0.1:8000/v1/models";

// The "Disk KV cache" group (docs/SERVER.md "Disk KV cache").
void add_kv_cache_flags(CLI::App& app, ds4::server::KvDiskOptions& kv) {
    app.add_option("--kv-disk-dir", kv.dir,
                   "Disk KV cache: checkpoints of conversations under DIR (created if missing), in "
                   "a subfolder per model, so other sessions, restarts and replicas resume without "
                   "prefill (docs/SERVER.md)")
        ->option_text("DIR")->group("Disk KV cache");
    app.add_option("--kv-disk-space-mb", kv.space_mb, "Budget of the model's cache subfolder in MiB (default 4096)")
        ->check(CLI::Range(uint64_t(1), uint64_t(1) << 30))->option_text("N")->group("Disk KV cache");
    app.add_option("--kv-cache-min-tokens", kv.policy.min_tokens,
                   "Shortest checkpoint written or loaded, in tokens (default 512)")
        ->check(ds4::cli_checks::at_least(1))->option_text("N")->group("Disk KV cache");
    app.add_option("--kv-cache-cold-max-tokens", kv.policy.cold_max_tokens,
                   "Cold checkpoints only for prompts up to N tokens (default 30000; 0: none)")
        ->check(ds4::cli_checks::at_least(0))->option_text("N")->group("Disk KV cache");
    app.add_option("--kv-cache-continued-interval-tokens", kv.policy.continued_interval,
                   "A checkpoint at every multiple of N tokens (rounded up to the alignment; default "
                   "10000; 0: none)")
        ->check(ds4::cli_checks::at_least(0))->option_text("N")->group("Disk KV cache");
    app.add_option("--kv-cache-boundary-trim-tokens", kv.policy.boundary_trim,
                   "A cold checkpoint without a chat anchor stops N tokens before the prompt's end "
                   "(default 32)")
        ->check(ds4::cli_checks::at_least(0))->option_text("N")->group("Disk KV cache");
    app.add_option("--kv-cache-boundary-align-tokens", kv.policy.boundary_align,
                   "...aligned down to a multiple of N (default 2048)")
        ->check(ds4::cli_checks::at_least(1))->option_text("N")->group("Disk KV cache");
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"ds4-server: OpenAI / Anthropic compatible HTTP server for DeepSeek V4 and GLM 5.2 "
                 "(DwarfStar C++)", "ds4-server"};
    ds4::add_version_flag(app, "ds4-server");
    app.get_formatter()->column_width(34);
    ds4::frontend::add_model_flags(app, o,
                                   {.model_group = "Model and runtime",
                                    .ctx_help = "Context size in tokens (default 32768, or the model's trained "
                                                "context when that is smaller)",
                                    .qat_help = "Turn off the FP8 KV / FP4 indexer simulations"});
    app.add_option("--rewind-slack", o.rewind_slack,
                   "Positions the live session can rewind in O(1) when a request diverges from "
                   "it (default 4096)")
        ->check(ds4::cli_checks::at_least(0))->group("Model and runtime");
    app.add_option("-n,--tokens", o.server.default_max_tokens,
                   "Default max output tokens when a client sends none (default 393216; always "
                   "capped by the free context)")
        ->check(ds4::cli_checks::at_least(1))->group("Model and runtime");
    app.add_option("--host", o.server.host, "Listen address (default 127.0.0.1; localhost = 127.0.0.1)")
        ->group("HTTP API");
    app.add_option("--port", o.server.port,
                   "Listen port (default 8000; 0 = any free port, printed on stderr)")
        ->check(CLI::Range(0, 65535))->group("HTTP API");
    app.add_option("--api-key", o.server.api_key,
                   "Require this key on every route but /health (Authorization: Bearer KEY or "
                   "x-api-key: KEY); default: no key")
        ->option_text("KEY")->group("HTTP API");
    app.add_option("--allowed-host", o.server.allowed_hosts,
                   "Also answer requests whose Host header names NAME (repeatable); by default only "
                   "localhost and the listen address")
        ->option_text("NAME")->group("HTTP API");
    app.add_flag("--cors", o.server.cors,
                 "Serve web pages: send Access-Control-Allow-* headers and accept any Origin")
        ->group("HTTP API");
    app.add_option("--request-timeout", o.server.request_timeout_s,
                   "Wall-clock limit of a generation request in seconds (default 0: none); the "
                   "request ends with an error")
        ->check(seconds_in(0, 1e6))->option_text("S")->group("HTTP limits");
    app.add_option("--drain-timeout", o.server.drain_timeout_s,
                   "On SIGTERM, let the requests already accepted finish for up to S seconds while "
                   "/health answers 503 and new requests are refused (default 0: end them at once); "
                   "then save the disk KV cache and exit 0. A second signal stops at once")
        ->check(seconds_in(0, 86400))->option_text("S")->group("HTTP limits");
    app.add_option("--max-body", o.server.max_body,
                   "Largest request body in bytes, chunked or not (default 67108864)")
        ->check(CLI::Range(size_t(1), size_t(1) << 40))->group("HTTP limits");
    app.add_option("--header-timeout", o.server.header_timeout_s,
                   "Seconds a client has to send the request header (default 10)")
        ->check(seconds_in(0.1, 3600))->option_text("S")->group("HTTP limits");
    app.add_option("--body-timeout", o.server.body_timeout_s,
                   "Seconds a client has to send the body after the header (default 60)")
        ->check(seconds_in(0.1, 86400))->option_text("S")->group("HTTP limits");
    app.add_option("--max-connections", o.server.max_connections,
                   "Open connections, all clients together (default 256)")
        ->check(CLI::Range(1, 100000))->group("HTTP limits");
    app.add_option("--max-client-connections", o.server.max_client_connections,
                   "Open connections from one client address (default 32)")
        ->check(CLI::Range(1, 100000))->group("HTTP limits");
    app.add_option("--http-threads", o.server.http_threads,
                   "Requests handled at once besides /health, /metrics and /v1/models (default "
                   "64); generation runs in the --parallel slots")
        ->check(CLI::Range(1, 4096))->group("HTTP limits");
    app.add_option("--parallel,--batched-session", o.server.scheduler.parallel,
                   "Slots: conversations served at once, each a live sequence sized for the whole "
                   "context; generating slots advance together in one batched evaluation per token "
                   "(default 1)")
        ->check(CLI::Range(1, 256))->option_text("N")->group("Model and runtime");
    app.add_option("--mixed-prefill-quantum", o.server.scheduler.quantum,
                   "Prompt tokens a slot evaluates per step while other slots generate (default: "
                   "chosen by the cost model within --max-decode-stall; N fixes the piece)")
        ->check(ds4::cli_checks::at_least(1))->option_text("N")->group("Model and runtime");
    app.add_option("--max-decode-stall", o.server.scheduler.max_decode_stall,
                   "A step that reads prompts beside generating slots may take up to F times "
                   "their step alone, by the measured cost of a step (default 4)")
        ->check(CLI::Range(1.0, 1000.0))->option_text("F")->group("Model and runtime");
    app.add_option("--max-queue", o.server.scheduler.max_queue,
                   "Requests waiting for a free slot; beyond, 503 with Retry-After (default 64)")
        ->check(CLI::Range(0, 1000000))->option_text("N")->group("HTTP limits");
    app.add_option("--trace", o.server.trace_path,
                   "Append every request (headers with keys redacted, body) and its response (body, "
                   "or each SSE event as sent) to FILE as JSON lines (docs/SERVER.md)")
        ->option_text("FILE")->group("HTTP API");
    app.add_option("--tool-memory-max-ids", o.server.tool_memory_max_ids,
                   "Tool-call ids remembered for exact DSML replay, least recently used out "
                   "(default 100000; at most 512 MiB of DSML)")
        ->check(CLI::Range(size_t(1), size_t(1) << 32))->group("HTTP API");
    app.add_flag("--disable-exact-dsml-tool-replay", [&o](int64_t) { o.server.exact_tool_replay = false; },
                 "Render tool calls from history in the canonical DSML form, not as the model "
                 "sampled them (the session is then re-evaluated from the first difference)")
        ->group("HTTP API");
    app.add_option("--response-store", o.server.response_store_max,
                   "Replies kept for Responses previous_response_id and for live continuations "
                   "(tool results sent without their history), least recently used out "
                   "(default 1000; 0: none)")
        ->check(CLI::Range(size_t(0), size_t(1) << 32))->option_text("N")->group("HTTP API");
    app.add_option_function<size_t>(
           "--response-store-mb", [&o](size_t mb) { o.server.response_store_bytes = mb << 20; },
           "Memory for those replies in MiB (default 256)")
        ->check(CLI::Range(size_t(1), size_t(1) << 20))->option_text("N")->group("HTTP API");
    add_kv_cache_flags(app, o.server.scheduler.kv);
    ds4::streaming::add_flags(app, o.streaming, "SSD streaming");
    ds4::speculative::add_flags(app, o.spec, "Speculative decoding");
    app.add_option("--test-force-output", o.force_output,
                   "TEST ONLY: JSON array of output texts; each request emits the next one "
                   "instead of sampling (docs/SERVER.md)")
        ->option_text("FILE")->group("Testing");
    ds4::pipeline::add_dist_flags(app, o.dist);
    ds4::frontend::add_steering_flags(app, o.steering);
    app.footer(kFooter);
    if (const auto exit_code = ds4::frontend::parse(app, argc, argv, o)) return *exit_code;
    if (const std::string e = ds4::speculative::flag_error(o.spec); !e.empty()) {
        std::fprintf(stderr, "ds4-server: %s\n", e.c_str());
        return 2;
    }
    return ds4::frontend::run_main("ds4-server", [&] { return run(o); });
}
