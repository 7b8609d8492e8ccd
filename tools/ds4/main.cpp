// ds4: the DwarfStar command-line front end. Modes so far: one-shot chat (-p / --prompt-file),
// --inspect, --token-ids, --dump-tokens.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "chat/prefix_file.h"
#include "common/version.h"
#include "common/cli_checks.h"
#include "common/error.h"
#include "diagnostics.h"
#include "eval.h"
#include "frontend/run.h"
#include "frontend/startup.h"
#include "generate.h"
#include "imatrix_cli.h"
#include "inspect.h"
#include "interactive.h"
#include "logprobs.h"
#include "options.h"
#include "pipeline/worker.h"
#include "sampling/sampler.h"
#include "streaming/used_memory.h"
#include "tokens.h"

namespace ds4::cli {

// --help commands.
constexpr const char* kCommands =
    "Interactive commands (ds4 without -p): /help, /think, /think-max, /nothink, /ctx N,\n"
    "/read FILE, /save FILE, /load FILE, /steer S, /quit, /exit; Ctrl+C stops a reply, Ctrl+D exits.\n";

// The end of --help: the interactive commands and examples.
constexpr const char* kFooter =
    "Without -p or --prompt-file, ds4 is an interactive chat: /help, /think, /think-max,\n"
    "/nothink, /ctx N, /read FILE, /save FILE, /load FILE, /steer S, /quit; Ctrl+C stops a\n"
    "reply, Ctrl+D exits; history in ~/.ds4_history. -n caps each reply.\n"
    "--help TOPIC: runtime, sampling, diagnostics, steering, distributed, commands, all.\n"
    "Examples:\n"
    "  ds4 -m models/default.gguf\n"
    "  ds4 -m models/default.gguf -p \"Hello\" --nothink -n 32\n"
    "  ds4 -m models/default.gguf --inspect\n"
    "  ds4 --inspect ds4flash.gguf\n"
    "  ds4 -m models/default.gguf --token-ids ids.txt --dump-logits-f32 logits.f32\n"
    "  ds4 -m big.gguf --ssd-streaming --ssd-streaming-cache-experts 8GB -p \"Hello\"\n"
    "  ds4 -m ds4flash.gguf --mtp mtp.gguf --mtp-draft 3 -p \"Hello\"   (docs/SPECULATIVE.md)\n"
    "Pipeline over two machines (docs/DISTRIBUTED.md):\n"
    "  ds4 -m M --role worker --layers 22:output --coordinator HOST 4000 --listen 0.0.0.0 4001\n"
    "  ds4 -m M --role coordinator --layers 0:21 --listen 0.0.0.0 4000 -p \"Hello\"\n"
    "Get a model: scripts/run-default.sh writes a small random one to models/default.gguf;\n"
    "or download a DeepSeek V4 Flash GGUF as ./ds4flash.gguf.";

// --prefix-file's turns into o.prefix; false (the reason on stderr) when they cannot be used.
bool load_prefix(Options& o) {
    if (o.raw_prompt || o.raw) {
        std::fprintf(stderr, "ds4: --prefix-file is a chat conversation; --raw-prompt and --raw take no template\n");
        return false;
    }
    try {
        o.prefix = chat::read_prefix_file(o.prefix_file);
    } catch (const Error& e) {
        std::fprintf(stderr, "ds4: %s\n", e.what());
        return false;
    }
    return true;
}

// --temp, --top-p, --top-k, --min-p, --seed, with the server's rules for the same knobs
// (sampling/sampler.h). Unset knobs take the chat format's defaults (V4: T 1, top-p 1, min-p
// 0.05; GLM 5.2: top-p 0.95, min-p 0), so only the given ones reach Options.
struct SamplingFlags {
    float temperature = 1, top_p = 1, min_p = 0;
    uint64_t seed = 0;
    CLI::Option *temp = nullptr, *top_p_opt = nullptr, *min_p_opt = nullptr, *seed_opt = nullptr;

    void add(CLI::App& app, Options& o) {
        const std::string g = "Prompt and sampling";
        temp = app.add_option("--temp", temperature, "Temperature (default 1; 0: greedy)")
                   ->check(cli_checks::real(sampling::temperature_error, ">= 0"))->group(g);
        top_p_opt = app.add_option("--top-p", top_p, "Top-p (default: the model's, 1 (off) for V4, 0.95 for GLM)")
                        ->check(cli_checks::real(sampling::top_p_error, "in [0, 1]"))->group(g);
        app.add_option("--top-k", o.top_k, "Top-k (default 0: off)")
            ->check(cli_checks::integer(sampling::top_k_error, "NONNEGATIVE"))->group(g);
        min_p_opt = app.add_option("--min-p", min_p,
                                   "Min-p relative to the top token (default: the model's, 0.05 for V4, 0 for GLM)")
                        ->check(cli_checks::real(sampling::min_p_error, "in [0, 1]"))->group(g);
        seed_opt = app.add_option("--seed", seed, "Sampling seed (default: random)")->group(g);
    }
    void apply(Options& o) const {
        if (seed_opt->count() > 0) o.seed = seed;
        if (temp->count() > 0) o.temperature = temperature;
        if (top_p_opt->count() > 0) o.top_p = top_p;
        if (min_p_opt->count() > 0) o.min_p = min_p;
    }
};

ParseResult parse_options(int argc, char** argv) {
    std::vector<std::string> args = ds4::frontend::upstream_spellings(argc, argv);  // "-sys TEXT"
    const std::string help_topic = take_help_topic(args);
    std::vector<char*> argv2;
    for (auto& a : args) argv2.push_back(a.data());
    argc = int(argv2.size());
    argv = argv2.data();

    ParseResult r;
    Options& o = r.options;
    CLI::App app{"ds4: DeepSeek V4 and GLM 5.2 inference engine (DwarfStar C++)", "ds4"};
    ds4::add_version_flag(app, "ds4");
    app.get_formatter()->column_width(34);
    std::string inspect_path;
    auto* inspect = app.add_option("--inspect", inspect_path,
                                   "Print the model's metadata and tensor table, then exit "
                                   "(FILE defaults to the -m model)")
                        ->expected(0, 1)
                        ->option_text("[FILE]")
                        ->group("Diagnostics");
    app.add_option("--token-ids", o.token_ids,
                   "Evaluate the whitespace-separated token ids in FILE exactly (no BOS, no chat "
                   "template)")
        ->option_text("FILE")->group("Evaluation");
    app.add_option("--dump-logits-f32", o.dump_logits,
                   "With --token-ids: write every position's logits, raw little-endian float32 "
                   "[n_tokens][n_vocab]")
        ->option_text("OUT")->group("Evaluation");
    auto* n_opt = app.add_option("-n,--tokens,--n-predict", o.n_predict,
                                 "Maximum new tokens (default: until EOS or the context is full); "
                                 "with --token-ids: print N greedy continuation ids")
                      ->check(cli_checks::at_least(0))->group("Prompt and sampling");
    frontend::add_model_flags(
        app, o, {.eval_group = "Evaluation",
                 .prefill_help = "Prefill chunk size in tokens (default 512; 1 = token-by-token decode)"});
    streaming::add_flags(app, o.streaming, "SSD streaming");
    speculative::add_flags(app, o.spec, "Speculative decoding");
    auto* prompt = app.add_option("-p,--prompt", o.prompt, "Prompt text (one-shot; without it: interactive chat)")->option_text("TEXT");
    auto* prompt_file = app.add_option("--prompt-file", o.prompt_file, "Read the prompt from FILE (exact bytes)")
                            ->option_text("FILE");
    prompt->excludes(prompt_file);
    auto* prefix_file = app.add_option("--prefix-file", o.prefix_file,
                                       "Start from the conversation in FILE: USER: and ASSISTANT: turns, "
                                       "markers at line start, the last turn the assistant's")
                            ->option_text("FILE")->group("Prompt and sampling");
    // A later -p / -n overrides an earlier one (scripts append the user's arguments).
    prompt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    n_opt->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    app.add_option("--system", o.system,
                   "-sys TEXT: system prompt (default \"You are a helpful assistant\"; empty: none)")
        ->option_text("TEXT")->group("Prompt and sampling");
    bool think_f = false, nothink_f = false, think_max_f = false;
    auto* think = app.add_flag("--think", think_f, "Thinking mode (the default)")->group("Prompt and sampling");
    auto* nothink = app.add_flag("--nothink", nothink_f, "No thinking: the answer comes directly")
                        ->group("Prompt and sampling");
    auto* think_max = app.add_flag("--think-max", think_max_f,
                                   "Think Max (needs --ctx >= 393216, else thinking as --think)")
                          ->group("Prompt and sampling");
    think->excludes(nothink)->excludes(think_max);
    nothink->excludes(think_max);
    SamplingFlags sampling_flags;
    sampling_flags.add(app, o);
    bool dump_tokens = false;
    app.add_flag("--dump-tokens", dump_tokens,
                 "Print the prompt's token ids on one line, space-separated, then exit")
        ->group("Diagnostics");
    app.add_flag("--raw", o.raw,
                 "With --dump-tokens: the literal bytes (no BOS, no template, marker text as "
                 "plain text)")
        ->group("Diagnostics");
    pipeline::add_dist_flags(app, o.dist);
    frontend::add_steering_flags(app, o.steering);
    add_diagnostic_flags(app, o);
    add_logprob_flags(app, o.logprob);
    add_imatrix_flags(app, o.imatrix);
    app.footer(kFooter);
    if (!help_topic.empty()) {
        print_help_topic(app, help_topic, kCommands);
        r.exit_code = 0;
        return r;
    }
    if ((r.exit_code = frontend::parse(app, argc, argv, o))) return r;
    if (const std::string e = speculative::flag_error(o.spec); !e.empty()) {
        std::fprintf(stderr, "ds4: %s\n", e.c_str());
        r.exit_code = 2;
        return r;
    }
    if (prefix_file->count() > 0 && !load_prefix(o)) {
        r.exit_code = 2;
        return r;
    }
    o.n_given = n_opt->count() > 0;
    sampling_flags.apply(o);
    if (nothink->count() > 0) o.thinking = chat::ThinkingMode::Off;
    if (think_max->count() > 0) o.thinking = chat::ThinkingMode::Max;
    if (prompt->count() > 0 || prompt_file->count() > 0) o.mode = Mode::Generate;
    if (!o.token_ids.empty()) o.mode = Mode::EvalTokens;
    if (!o.dump_logits_json.empty()) o.mode = Mode::DumpLogits;
    if (o.decode_consistency > 0) o.mode = Mode::DecodeConsistency;
    if (o.replay_check) o.mode = Mode::ReplayCheck;
    if (dump_tokens) o.mode = Mode::DumpTokens;
    if (o.dist.role == pipeline::Role::worker) o.mode = Mode::Worker;
    if (!o.dump_logits.empty() && o.token_ids.empty()) {
        std::fprintf(stderr, "ds4: --dump-logits-f32 needs --token-ids\n");
        r.exit_code = 2;
        return r;
    }
    if (inspect->count() > 0) {
        o.mode = Mode::Inspect;
        if (!inspect_path.empty()) {
            if (o.model_given && inspect_path != o.model) {
                std::fprintf(stderr, "ds4: --inspect %s and -m %s name different files\n",
                             inspect_path.c_str(), o.model.c_str());
                r.exit_code = 2;
                return r;
            }
            o.model = inspect_path;
            o.model_given = true;
        }
    }
    return r;
}

namespace {

// The default path is a convention, not something the user typed: explain how to get a model.
void require_model(const Options& o) {
    if (o.model_given || std::filesystem::exists(o.model)) return;
    fail("model file {} not found; write the small default model with scripts/run-default.sh "
         "and pass -m models/default.gguf, or download a DeepSeek V4 Flash GGUF to {} (or pass "
         "-m FILE)", o.model, o.model);
}

int run(const Options& o) {
    if (o.logprob.active() && o.mode != Mode::Worker && o.mode != Mode::Inspect) {
        require_model(o);
        return run_logprob_mode(o);
    }
    if (o.imatrix.wanted()) {
        require_model(o);
        return run_imatrix(o);
    }
    switch (o.mode) {
        case Mode::Inspect:
            require_model(o);
            return run_inspect(o.model);
        case Mode::EvalTokens:
            require_model(o);
            return run_eval_tokens(o);
        case Mode::DumpTokens:
            require_model(o);
            return run_dump_tokens(o);
        case Mode::Generate:
            require_model(o);
            return run_generate(o);
        case Mode::DumpLogits:
        case Mode::DecodeConsistency:
        case Mode::ReplayCheck:
            require_model(o);
            if (o.prompt.empty() && o.prompt_file.empty())
                fail("{} needs -p TEXT or --prompt-file FILE",
                     o.mode == Mode::DumpLogits           ? "--dump-logits"
                     : o.mode == Mode::DecodeConsistency ? "--decode-consistency"
                                                          : "--dist-replay-check");
            if (o.mode == Mode::ReplayCheck) return run_replay_check(o);
            return o.mode == Mode::DumpLogits ? run_dump_logits(o) : run_decode_consistency(o);
        case Mode::Worker:
            require_model(o);
        {
            const auto used = streaming::simulate_used_memory(o.streaming.simulate_used, "ds4");
            return pipeline::run_worker(frontend::worker_options(o));
        }
        case Mode::None:
            break;
    }
    // No prompt: the interactive chat.
    require_model(o);
    return run_chat(o);
}

}  // namespace
}  // namespace ds4::cli

int main(int argc, char** argv) {
    const auto parsed = ds4::cli::parse_options(argc, argv);
    if (parsed.exit_code) return *parsed.exit_code;
    return ds4::frontend::run_main("ds4", [&] { return ds4::cli::run(parsed.options); });
}
