#include "options.h"

#include <CLI/CLI.hpp>

#include <cstdio>

#include "common/cli_checks.h"
#include "common/version.h"
#include "pipeline/options.h"
#include "sampling/sampler.h"
#include "streaming/options.h"

namespace ds4::eval_cli {

constexpr const char* kFooter =
    "On a terminal the split screen lists the cases on the left and streams the reply on the right\n"
    "(reasoning dimmed): Up/Down select a case, Enter runs it next, p pauses or resumes after the\n"
    "current case, q stops and prints the report. --plain (or output that is not a terminal) prints\n"
    "the replies and results as lines instead.\n"
    "Examples:\n"
    "  ds4-eval -m ds4flash.gguf                         # every built-in case\n"
    "  ds4-eval -m ds4flash.gguf --suite code --questions 3 --trace eval.trace\n"
    "  ds4-eval --regrade-trace eval.trace               # grade a trace again, no model\n"
    "  ds4-eval -m ds4flash.gguf --cases my_cases.jsonl --json-report report.json --plain";

namespace {

// -n and the budgets: explicit budgets must fit (hard < -n <= ..., soft >= hard); defaults
// that do not fit a small -n shrink to a quarter and a half of it.
std::string resolve_budgets(Options& o, bool soft_given, bool hard_given) {
    if (!hard_given && o.hard_budget >= o.max_tokens) o.hard_budget = o.max_tokens / 4;
    if (!soft_given && o.soft_budget >= o.max_tokens) o.soft_budget = std::max(o.hard_budget, o.max_tokens / 2);
    if (o.hard_budget >= o.max_tokens)
        return "--hard-limit-reply-budget (" + std::to_string(o.hard_budget) + ") must be smaller than -n (" +
               std::to_string(o.max_tokens) + ")";
    if (o.soft_budget < o.hard_budget)
        return "--soft-limit-reply-budget (" + std::to_string(o.soft_budget) + ") must be >= --hard-limit-reply-budget (" +
               std::to_string(o.hard_budget) + ")";
    return "";
}

}  // namespace

ParseResult parse_options(int argc, char** argv) {
    std::vector<std::string> args = frontend::upstream_spellings(argc, argv);  // "-sys TEXT"
    std::vector<char*> argv2;
    for (auto& a : args) argv2.push_back(a.data());

    ParseResult r;
    Options& o = r.options;
    CLI::App app{"ds4-eval: a capability regression runner; graded questions on the engine in process", "ds4-eval"};
    ds4::add_version_flag(app, "ds4-eval");
    app.get_formatter()->column_width(36);
    frontend::add_model_flags(app, o, {.ctx_help = "Context size in tokens (default: the largest prompt plus -n)", .ctx_min = 256});
    streaming::add_flags(app, o.streaming, "SSD streaming");
    speculative::add_flags(app, o.spec, "Speculative decoding");
    pipeline::add_dist_flags(app, o.dist);
    frontend::add_steering_flags(app, o.steering);
    app.add_option("--power", o.power, "Duty cycle 1..100: sleep between tokens (default 100; output unchanged)")
        ->check(CLI::Range(1, 100))->option_text("N")->group("Model and runtime");

    std::string g = "Cases";
    app.add_option("--cases", o.cases, "Read the cases from FILE (JSONL or TSV, docs/EVAL.md; default: the built-in set)")
        ->option_text("FILE")->group(g);
    app.add_option("--suite", o.suite, "Run one suite (built-in: arith, logic, code; default all)")->option_text("NAME")->group(g);
    app.add_option("--case-id", o.case_ids, "Run this case (repeatable)")->option_text("ID")->group(g);
    app.add_option("--questions", o.questions, "Run only the first N selected cases")
        ->check(cli_checks::at_least(1))->group(g);
    app.add_option("--case-sequence", o.case_sequence, "Run these selected cases in this order (1-based, e.g. 3,1,3)")
        ->option_text("LIST")->group(g);
    app.add_flag("--list-cases", o.list_cases, "List the selected cases and exit")->group(g);
    app.add_flag("--validate-cases", o.validate_cases, "Check the case file and exit (0: valid)")->group(g);
    app.add_flag("--dump-cases", o.dump_cases, "Write the selected cases as JSONL (the --cases format) and exit")->group(g);

    g = "Generation";
    app.add_option("-n,--tokens", o.max_tokens, "Most tokens per reply, reasoning included (default 16000)")
        ->check(cli_checks::at_least(2))->group(g);
    bool think_f = false, nothink_f = false, think_max_f = false;
    auto* think = app.add_flag("--think", think_f, "Reasoning before the answer (the default)")->group(g);
    auto* nothink = app.add_flag("--nothink", nothink_f, "No reasoning: the answer comes directly")->group(g);
    auto* think_max = app.add_flag("--think-max", think_max_f, "Maximum reasoning effort (needs a large context)")->group(g);
    think->excludes(nothink)->excludes(think_max);
    nothink->excludes(think_max);
    auto* soft = app.add_option("--soft-limit-reply-budget", o.soft_budget,
                                "With N tokens left, close the reasoning once </think> ranks in the top "
                                "--soft-limit-think-close-rank (default 1024)")
                     ->check(cli_checks::at_least(0))->group(g);
    auto* hard = app.add_option("--hard-limit-reply-budget", o.hard_budget,
                                "Force </think> with N tokens left for the answer (default 512)")
                     ->check(cli_checks::at_least(0))->group(g);
    app.add_option("--soft-limit-think-close-rank", o.close_rank, "The rank --soft-limit-reply-budget needs (default 3)")
        ->check(cli_checks::at_least(1))->group(g);
    app.add_option("--system", o.system, "-sys TEXT: the system prompt (default: ds4-eval's own)")->option_text("TEXT")->group(g);
    app.add_option("--temp", o.temperature, "Temperature (default 0: greedy)")
        ->check(cli_checks::real(sampling::temperature_error, ">= 0"))->group("Sampling");
    float top_p = 1, min_p = 0;
    uint64_t seed = 0;
    auto* tp = app.add_option("--top-p", top_p, "Top-p (default: the model's)")
                   ->check(cli_checks::real(sampling::top_p_error, "in [0, 1]"))->group("Sampling");
    app.add_option("--top-k", o.top_k, "Top-k (default 0: off)")
        ->check(cli_checks::integer(sampling::top_k_error, "NONNEGATIVE"))->group("Sampling");
    auto* mp = app.add_option("--min-p", min_p, "Min-p (default: the model's)")
                   ->check(cli_checks::real(sampling::min_p_error, "in [0, 1]"))->group("Sampling");
    auto* s = app.add_option("--seed", seed, "Sampling seed (default: random)")->group("Sampling");

    g = "Output";
    app.add_option("--trace", o.trace, "Write every case's prompt, reply and grading to FILE")->option_text("FILE")->group(g);
    app.add_option("--regrade-trace", o.regrade_trace, "Grade the cases of a --trace FILE again and exit (no model)")
        ->option_text("FILE")->group(g);
    app.add_option("--json-report", o.json_report, "Also write the report as JSON to FILE")->option_text("FILE")->group(g);
    app.add_flag("--plain", o.plain, "Lines instead of the split-screen terminal UI")->group(g);
    app.add_option("--pause-ms", o.pause_ms, "Pause after each result in the terminal UI (default 350)")
        ->check(cli_checks::at_least(0))->group(g);
    app.add_flag("--self-test-extractors", o.self_test, "Check the answer extractors on built-in examples and exit")->group(g);
    app.add_option("--script-replies", o.script_replies,
                   "Test hook: the replies, forced from a JSON array of strings (one per case, in run order)")
        ->option_text("FILE")->group("Testing");
    app.footer(kFooter);
    if ((r.exit_code = frontend::parse(app, int(argv2.size()), argv2.data(), o))) return r;
    std::string why = speculative::flag_error(o.spec);
    if (why.empty() && o.dist.role == pipeline::Role::worker) why = "a pipeline worker is started with ds4 --role worker";
    if (why.empty()) why = resolve_budgets(o, soft->count() > 0, hard->count() > 0);
    if (!why.empty()) {
        std::fprintf(stderr, "ds4-eval: %s\n", why.c_str());
        r.exit_code = 2;
        return r;
    }
    if (nothink_f) o.thinking = chat::ThinkingMode::Off;
    if (think_max_f) o.thinking = chat::ThinkingMode::Max;
    if (tp->count()) o.top_p = top_p;
    if (mp->count()) o.min_p = min_p;
    if (s->count()) o.seed = seed;
    return r;
}

}  // namespace ds4::eval_cli
