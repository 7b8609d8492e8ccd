#include "common/version.h"
#include "options.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

#include "chat/prefix_file.h"
#include "common/cli_checks.h"
#include "common/error.h"
#include "pipeline/options.h"
#include "sampling/sampler.h"
#include "streaming/options.h"

namespace ds4::agent_cli {

constexpr const char* kFooter =
    "In the agent: /help, /save, /list, /switch ID, /del ID, /strip ID, /history [N], /new,\n"
    "/compact, /think, /nothink, /quit. Ctrl+C stops a reply or a command, Ctrl+D leaves.\n"
    "Tools: read, more, write, edit, search, list, bash, bash_status, bash_stop (docs/AGENT.md).\n"
    "Examples:\n"
    "  ds4-agent -m models/default.gguf\n"
    "  ds4-agent -m ds4flash.gguf --chdir ~/src/project\n"
    "  ds4-agent -m ds4flash.gguf -p \"list the files here\" --non-interactive --yes";

ParseResult parse_options(int argc, char** argv) {
    std::vector<std::string> args = ds4::frontend::upstream_spellings(argc, argv);  // "-sys TEXT"
    std::vector<char*> argv2;
    for (auto& a : args) argv2.push_back(a.data());

    ParseResult r;
    Options& o = r.options;
    o.ctx = 32768;
    CLI::App app{"ds4-agent: a coding agent in the terminal, on the engine in process", "ds4-agent"};
    ds4::add_version_flag(app, "ds4-agent");
    app.get_formatter()->column_width(34);
    frontend::add_model_flags(app, o, {.ctx_help = "Context size in tokens (default 32768, or the model's trained context when smaller)",
                                       .ctx_min = 256});
    streaming::add_flags(app, o.streaming, "SSD streaming");
    speculative::add_flags(app, o.spec, "Speculative decoding");
    pipeline::add_dist_flags(app, o.dist);
    const std::string g = "Agent";
    auto* p = app.add_option("-p,--prompt", o.prompt, "The first message")->option_text("TEXT")->group(g);
    auto* pf = app.add_option("--prompt-file", o.prompt_file, "The first message, from FILE")->option_text("FILE")->group(g);
    p->excludes(pf);
    app.add_option("--prefix-file", o.prefix_file,
                   "Start every conversation from the USER:/ASSISTANT: turns in FILE (markers at line "
                   "start, the last turn the assistant's)")
        ->option_text("FILE")->group(g);
    app.add_flag("--non-interactive", o.non_interactive,
                 "With -p: one turn, then exit; without: each stdin line is a turn (no prompts; writes "
                 "and commands need --yes)")->group(g);
    app.add_option("--system", o.system, "-sys TEXT: added to the agent's system prompt")->option_text("TEXT")->group(g);
    app.add_option("--chdir", o.chdir, "Work in DIR: the tools cannot leave it")->option_text("DIR")->group(g);
    app.add_flag("--allow-outside", o.allow_outside, "Let the file tools reach outside --chdir")->group(g);
    app.add_flag("-y,--yes", o.yes, "Writes, edits and commands without asking")->group(g);
    app.add_option("--trace", o.trace, "Append everything the model sees and says to FILE")->option_text("FILE")->group(g);
    app.add_option("--session-dir", o.session_dir, "Where sessions are saved (default ~/.ds4/sessions)")
        ->option_text("DIR")->group(g);
    app.add_option("-n,--tokens", o.max_reply_tokens, "Most tokens in one reply (default 8192)")
        ->check(cli_checks::at_least(1))->group(g);
    app.add_option("--max-steps", o.max_steps, "Most replies in one turn (default 64)")
        ->check(cli_checks::at_least(1))->group(g);
    app.add_option("--script-replies", o.script_replies,
                   "Test hook: the model's replies, forced from a JSON array of strings (then sampled)")
        ->option_text("FILE")->group("Testing");
    bool nothink = false;
    app.add_flag("--nothink", nothink, "No reasoning before the answers")->group(g);
    float temperature = 1, top_p = 1, min_p = 0;
    uint64_t seed = 0;
    auto* t = app.add_option("--temp", temperature, "Temperature (default: the model's; 0: greedy)")
                  ->check(cli_checks::real(sampling::temperature_error, ">= 0"))->group("Sampling");
    auto* tp = app.add_option("--top-p", top_p, "Top-p (default: the model's)")
                   ->check(cli_checks::real(sampling::top_p_error, "in [0, 1]"))->group("Sampling");
    app.add_option("--top-k", o.top_k, "Top-k (default 0: off)")
        ->check(cli_checks::integer(sampling::top_k_error, "NONNEGATIVE"))->group("Sampling");
    auto* mp = app.add_option("--min-p", min_p, "Min-p (default: the model's)")
                   ->check(cli_checks::real(sampling::min_p_error, "in [0, 1]"))->group("Sampling");
    auto* s = app.add_option("--seed", seed, "Sampling seed (default: random)")->group("Sampling");
    app.footer(kFooter);
    if ((r.exit_code = frontend::parse(app, int(argv2.size()), argv2.data(), o))) return r;
    if (const std::string e = speculative::flag_error(o.spec); !e.empty()) {
        std::fprintf(stderr, "ds4-agent: %s\n", e.c_str());
        r.exit_code = 2;
        return r;
    }
    if (!o.prefix_file.empty()) {
        try {
            o.prefix = chat::read_prefix_file(o.prefix_file);
        } catch (const Error& e) {
            std::fprintf(stderr, "ds4-agent: %s\n", e.what());
            r.exit_code = 2;
            return r;
        }
    }
    if (o.dist.role == pipeline::Role::worker) {
        std::fprintf(stderr, "ds4-agent: a pipeline worker is started with ds4 --role worker\n");
        r.exit_code = 2;
        return r;
    }
    if (nothink) o.thinking = chat::ThinkingMode::Off;
    if (t->count()) o.temperature = temperature;
    if (tp->count()) o.top_p = top_p;
    if (mp->count()) o.min_p = min_p;
    if (s->count()) o.seed = seed;
    return r;
}

}  // namespace ds4::agent_cli
