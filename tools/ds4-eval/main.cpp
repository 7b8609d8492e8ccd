// ds4-eval: the capability regression runner (docs/EVAL.md, spec/PRODUCT.md §3.6). Graded
// questions on the engine in process: each case is rendered by the model's chat format,
// generated through engine::Engine (the loop every front end uses) with thinking budgets, and
// graded by strict final-line extractors; a report, a trace that regrades without the model,
// and a split-screen terminal UI (or plain lines).
#include <unistd.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "chat/format.h"
#include "common/error.h"
#include "common/file_io.h"
#include "frontend/script_replies.h"
#include "eval/cases.h"
#include "eval/grade.h"
#include "eval/report.h"
#include "eval/runner.h"
#include "eval/trace.h"
#include "frontend/instance.h"
#include "frontend/run.h"
#include "frontend/startup.h"
#include "gguf/reader.h"
#include "options.h"
#include "tokenizer/tokenizer.h"
#include "tui.h"

namespace ds4::eval_cli {
namespace {

std::atomic<bool> g_cancel{false};
void on_sigint(int) { g_cancel = true; }

std::string case_json(const eval::Case& c) {
    nlohmann::json j = {{"id", c.id}, {"suite", c.suite}, {"kind", eval::to_string(c.kind)}, {"expected", c.expected},
                        {"prompt", c.prompt}};
    if (!c.choices.empty()) j["choices"] = c.choices;
    return j.dump();
}

// --list-cases, --dump-cases.
void show_cases(const Options& o, const std::vector<eval::Case>& selected) {
    for (size_t i = 0; i < selected.size(); ++i) {
        const eval::Case& c = selected[i];
        if (o.dump_cases) {
            std::printf("%s\n", case_json(c).c_str());
            continue;
        }
        std::string first = c.prompt.substr(0, c.prompt.find('\n'));
        if (first.size() > 70) first = first.substr(0, 67) + "...";
        std::printf("%3zu  %-24s %-8s %-10s %s\n", i + 1, (c.suite + "/" + c.id).c_str(), eval::to_string(c.kind),
                    c.expected.c_str(), first.c_str());
    }
}

// Without -c: the context the largest selected prompt plus -n needs (at most the model's
// trained context; replies are then cut where the context ends).
int64_t auto_ctx(const Options& o, const std::vector<eval::Case>& cases) {
    const auto file = gguf::File::open(o.model);
    const auto tok = tokenizer::Tokenizer::from_gguf(*file);
    const auto format = chat::ChatFormat::from_gguf(*file, *tok);
    const std::string key = file->get_string("general.architecture") + ".context_length";
    const int64_t trained = file->find(key) ? int64_t(file->get_u64(key)) : 0;
    const int64_t cap = trained > 0 ? trained : int64_t(1) << 20;
    const chat::ThinkingMode mode = format->effective_thinking(o.thinking, cap);
    int64_t largest = 0;
    for (const eval::Case& c : cases)
        largest = std::max<int64_t>(largest, int64_t(eval::render_case(*format, c, o.system.empty() ? eval::kSystemPrompt : o.system,
                                                                        mode, cap).size()));
    const int64_t need = (largest + o.max_tokens + 1 + 255) / 256 * 256;
    return std::min(need, cap);
}

class App {
public:
    App(const Options& o, std::vector<eval::Case> cases)
        : o_(o), cases_(std::move(cases)),
          run_(frontend::start_model(o, {.tool = "ds4-eval", .tokenizer = true})) {
        format_ = chat::ChatFormat::from_gguf(run_.model->file(), *run_.tokenizer);
        spec_ = speculative::Speculation::open(*run_.model, o.spec);
        model::SessionOptions so = o.session();
        so.ctx = run_.ctx;
        engine_ = std::make_unique<engine::Engine>(*run_.model, *run_.tokenizer, so, format_->stop_ids());
        if (spec_) {
            drafter_ = spec_->new_drafter({.ctx = so.ctx, .qat = o.qat});
            engine_->set_drafter(drafter_.get());
        }
        const auto d = format_->sampling_defaults();
        eval::RunOptions ro{.max_tokens = o.max_tokens, .thinking = o.thinking, .soft_budget = o.soft_budget,
                            .hard_budget = o.hard_budget, .close_rank = o.close_rank,
                            .sampling = {.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p.value_or(d.top_p),
                                         .min_p = o.min_p.value_or(d.min_p),
                                         .seed = o.seed ? *o.seed : (uint64_t(std::random_device{}()) << 32 | std::random_device{}())},
                            .max_draft = spec_ ? spec_->max_draft() : 0, .system = o.system,
                            .after_token = [this] { duty_.step(); }};
        runner_ = std::make_unique<eval::Runner>(*engine_, *format_, ro);
        if (!o.script_replies.empty())
            for (const std::string& s : frontend::read_script_replies(o.script_replies))
                script_.push_back(run_.tokenizer->encode(s, tokenizer::Special::Match));
        outcomes_.resize(cases_.size());
        if (!o.trace.empty()) trace_ = std::make_unique<eval::TraceWriter>(o.trace, header());
    }

    int main() {
        if (!o_.plain && isatty(STDIN_FILENO) && isatty(STDOUT_FILENO)) run_tui();
        else run_plain();
        eval::print_report(stdout, cases_, outcomes_);
        if (!o_.json_report.empty()) write_file(o_.json_report, eval::json_report(cases_, outcomes_, header()));
        return eval::totals(outcomes_).errors > 0 ? 1 : 0;
    }

private:
    std::vector<std::pair<std::string, std::string>> header() const {
        const auto& r = runner_->options();
        return {{"model", o_.model},
                {"ctx", std::to_string(engine_->ctx())},
                {"cases", o_.cases.empty() ? "built-in" : o_.cases},
                {"questions", std::to_string(cases_.size())},
                {"max_tokens", std::to_string(r.max_tokens)},
                {"thinking", runner_->thinking() ? "yes" : "no"},
                {"temperature", fmt::format("{}", r.sampling.temperature)},
                {"top_p", fmt::format("{}", r.sampling.top_p)},
                {"min_p", fmt::format("{}", r.sampling.min_p)},
                {"seed", std::to_string(r.sampling.seed)},
                {"soft_limit_reply_budget", std::to_string(r.soft_budget)},
                {"hard_limit_reply_budget", std::to_string(r.hard_budget)},
                {"soft_limit_think_close_rank", std::to_string(r.close_rank)}};
    }

    // Runs case i (the k-th to run: script k, when scripted) and records it.
    const eval::Outcome& run_case(size_t i, const eval::Runner::Sink& sink, const engine::Progress& progress) {
        const std::vector<int32_t>* script = ran_ < script_.size() ? &script_[ran_] : nullptr;
        ++ran_;
        duty_ = frontend::DutyCycle(o_.power);  // the duty cycle counts from the case's start
        outcomes_[i] = runner_->run(cases_[i], script, sink, progress, &g_cancel);
        if (trace_) trace_->write(int(i), int(cases_.size()), cases_[i], outcomes_[i], runner_->options().system);
        return outcomes_[i];
    }

    void run_plain() {
        std::signal(SIGINT, on_sigint);
        const bool color = isatty(STDOUT_FILENO);
        for (size_t i = 0; i < cases_.size() && !g_cancel; ++i) {
            std::printf("[%zu/%zu] %s/%s\n", i + 1, cases_.size(), cases_[i].suite.c_str(), cases_[i].id.c_str());
            bool dim = false;
            const eval::Outcome& r = run_case(i, [&](std::string_view t, bool reasoning) {
                if (color && reasoning != dim) std::fputs((dim = reasoning) ? "\x1b[90m" : "\x1b[0m", stdout);
                std::fwrite(t.data(), 1, t.size(), stdout);
                std::fflush(stdout);
            }, {});
            if (color && dim) std::fputs("\x1b[0m", stdout);
            std::printf("\n-> %s given %s, correct %s; %lld prompt tokens, %lld generated (%s), think close %s, %.1f s%s%s\n",
                        eval::to_string(r.status), r.picked.c_str(), cases_[i].expected.c_str(), (long long)r.prompt_tokens,
                        (long long)r.generated, engine::to_string(r.stop), eval::to_string(r.close.kind), r.seconds,
                        r.error.empty() ? "" : ": ", r.error.c_str());
            std::fflush(stdout);
        }
        std::signal(SIGINT, SIG_DFL);
    }

    void run_tui();

    const Options& o_;
    std::vector<eval::Case> cases_;
    frontend::Started run_;
    std::unique_ptr<chat::ChatFormat> format_;
    std::unique_ptr<speculative::Speculation> spec_;
    std::unique_ptr<engine::Drafter> drafter_;
    std::unique_ptr<engine::Engine> engine_;
    std::unique_ptr<eval::Runner> runner_;
    std::unique_ptr<eval::TraceWriter> trace_;
    std::vector<std::vector<int32_t>> script_;
    size_t ran_ = 0;
    frontend::DutyCycle duty_{o_.power};
    std::vector<eval::Outcome> outcomes_;
};

void App::run_tui() {
    Tui ui(cases_, "ds4-eval " + std::filesystem::path(o_.model).filename().string());
    bool paused = false, quit = false;
    int queued = -1;
    const auto pending = [&](int i) { return outcomes_[size_t(i)].status == eval::Status::Pending; };
    const auto keys = [&] {
        for (Key k : ui.keys()) {
            if (k == Key::Up || k == Key::Down) ui.move_selection(k == Key::Up ? -1 : 1);
            if (k == Key::Enter && pending(ui.selected())) queued = ui.selected();
            if (k == Key::Pause) paused = !paused;
            if (k == Key::Quit) quit = g_cancel = true;
        }
        ui.set_paused(paused);
        ui.set_queued(queued);
    };
    int64_t shown = 0;
    while (!quit) {
        keys();
        if (paused) {
            ui.set_phase("paused");
            ui.draw();
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
            continue;
        }
        int i = queued >= 0 && pending(queued) ? queued : -1;
        for (int j = 0; i < 0 && j < int(cases_.size()); ++j)
            if (pending(j)) i = j;
        queued = -1;
        if (i < 0) break;
        ui.begin_case(size_t(i));
        ui.set_phase("case " + std::to_string(i + 1) + ": prefill");
        ui.draw();
        shown = 0;
        const eval::Outcome& r = run_case(size_t(i), [&](std::string_view t, bool reasoning) {
            ui.stream(t, reasoning);
            keys();
            ui.set_phase("case " + std::to_string(i + 1) + ": " + std::to_string(++shown) + " pieces");
            ui.draw(true);
        }, [&](int64_t done, int64_t total) {
            keys();
            ui.set_phase("case " + std::to_string(i + 1) + ": prefill " + std::to_string(done) + "/" + std::to_string(total));
            ui.draw(true);
        });
        ui.set_status(size_t(i), r.status, r.picked);
        ui.set_phase("case " + std::to_string(i + 1) + ": " + eval::to_string(r.status) + " (" +
                     std::to_string(r.generated) + " tokens)");
        ui.draw();
        for (int waited = 0; waited < o_.pause_ms && !quit; waited += 10) {
            keys();
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
}

int run(const Options& o) {
    if (o.self_test) {
        const int failed = eval::self_test();
        if (failed) return 1;
        std::printf("ds4-eval: answer extractor self-tests passed\n");
        return 0;
    }
    const std::vector<eval::Case> all = o.cases.empty() ? eval::builtin_cases() : eval::load_cases(o.cases);
    if (!o.regrade_trace.empty()) {
        const auto s = eval::regrade(eval::parse_trace(read_file(o.regrade_trace)), all, stdout);
        return s.total == 0 ? 1 : 0;
    }
    if (o.validate_cases) {
        std::string names;
        for (const auto& n : eval::suites(all)) names += " " + n;
        std::printf("ds4-eval: %zu valid cases; suites:%s\n", all.size(), names.c_str());
        return 0;
    }
    const std::vector<eval::Case> selected =
        eval::select(all, {.suite = o.suite, .ids = o.case_ids, .sequence = o.case_sequence, .questions = o.questions});
    if (o.list_cases || o.dump_cases) {
        show_cases(o, selected);
        return 0;
    }
    if (!o.model_given && !std::filesystem::exists(o.model))
        fail("model file {} not found; write the small default model with scripts/run-default.sh and pass -m "
             "models/default.gguf, or pass -m FILE",
             o.model);
    Options sized = o;
    if (!o.ctx_given) sized.ctx = auto_ctx(o, selected);
    App app(sized, selected);
    return app.main();
}

}  // namespace
}  // namespace ds4::eval_cli

int main(int argc, char** argv) {
    const auto parsed = ds4::eval_cli::parse_options(argc, argv);
    if (parsed.exit_code) return *parsed.exit_code;
    return ds4::frontend::run_main("ds4-eval", [&] { return ds4::eval_cli::run(parsed.options); });
}
