// ds4-agent: a coding agent in the terminal that drives the engine in process (docs/AGENT.md,
// spec/PRODUCT.md §3.4): the model's own tool syntax, no HTTP, one live KV session.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "agent/agent.h"
#include "agent/sessions.h"
#include "agent/tools.h"
#include "chat/format.h"
#include "common/error.h"
#include "common/file_io.h"
#include "frontend/script_replies.h"
#include "frontend/run.h"
#include "frontend/startup.h"
#include "model/identity.h"
#include "model/state_file.h"
#include "options.h"
#include "terminal.h"

namespace ds4::agent_cli {
namespace {

constexpr const char* kHelp =
    "Commands:\n"
    "  /help          this list\n"
    "  /save          save the session (KV state and text) in the session directory\n"
    "  /list          the saved sessions, newest first\n"
    "  /switch ID     continue a saved session (no prefill when its KV state is there)\n"
    "  /del ID        delete a saved session\n"
    "  /strip ID      drop a saved session's KV state, keep its text\n"
    "  /history [N]   the last N messages of this session (default 10)\n"
    "  /new           start a new session\n"
    "  /compact       summarise the older part of the session now (also automatic when the\n"
    "                 context fills up)\n"
    "  /think, /nothink  reasoning on or off\n"
    "  /quit, /exit   leave (so does Ctrl+D)\n"
    "Ctrl+C stops a reply or a running command; the session stays consistent.\n";

std::string system_prompt(const std::string& root, const std::string& extra) {
    std::string s =
        "You are ds4-agent, a coding agent in a terminal. You work in the directory " + root +
        "; tool paths are relative to it and cannot leave it. Use the tools to look at files (read, more, "
        "search, list), change them (write, edit: read a file before editing it) and run commands (bash). "
        "Be brief.";
    if (!extra.empty()) s += "\n\n" + extra;
    return s;
}

std::string home_dir(const char* sub) {
    const char* h = std::getenv("HOME");
    return std::string(h && *h ? h : ".") + sub;
}

class App {
public:
    explicit App(const Options& o)
        : o_(o), run_(frontend::start_model(o, {.tool = "ds4-agent", .tokenizer = true, .fit_trained_context = true})) {
        format_ = chat::ChatFormat::from_gguf(run_.model->file(), *run_.tokenizer);
        // The tools resolve every path against the root, so the process itself stays where it
        // was started: -m, --trace, --session-dir and --script-replies are relative to that.
        root_ = std::make_unique<agent::Root>(o.chdir.empty() ? "." : o.chdir, o.allow_outside);
        const bool ask = !o.non_interactive;
        term_ = std::make_unique<Terminal>(o.yes, ask);
        tools_ = std::make_unique<agent::Tools>(*root_, [this](const std::string& t, const std::string& w) {
            return term_->approve(t, w);
        });
        spec_ = speculative::Speculation::open(*run_.model, o.spec);
        model::SessionOptions so = o.session();
        so.ctx = run_.ctx;
        engine_ = std::make_unique<engine::Engine>(*run_.model, *run_.tokenizer, so, format_->stop_ids());
        if (spec_) {
            drafter_ = spec_->new_drafter({.ctx = so.ctx, .qat = o.qat});
            engine_->set_drafter(drafter_.get());
        }
        agent::AgentOptions ao;
        ao.system = system_prompt(root_->path(), o.system);
        ao.prefix = o.prefix;
        ao.thinking = format_->effective_thinking(o.thinking, so.ctx);
        const auto d = format_->sampling_defaults();
        ao.sampling = {.temperature = o.temperature.value_or(d.temperature), .top_k = o.top_k,
                       .top_p = o.top_p.value_or(d.top_p), .min_p = o.min_p.value_or(d.min_p),
                       .seed = o.seed ? *o.seed : (uint64_t(std::random_device{}()) << 32 | std::random_device{}())};
        ao.max_reply_tokens = o.max_reply_tokens;
        ao.max_steps = o.max_steps;
        if (!o.script_replies.empty()) ao.script = frontend::read_script_replies(o.script_replies);
        ao.trace_path = o.trace;
        if (spec_) ao.max_draft = spec_->max_draft();
        agent_ = std::make_unique<agent::Agent>(*engine_, *format_, *tools_, ao, *term_);
        store_ = std::make_unique<agent::SessionStore>(o.session_dir.empty() ? home_dir("/.ds4/sessions") : o.session_dir,
                                                       model::identity(*run_.model), model::kStateVersion);
    }

    int main() {
        std::string first = o_.prompt;
        if (!o_.prompt_file.empty()) first = read_file(o_.prompt_file);
        const bool interactive = !o_.non_interactive;
        if (interactive && isatty(STDIN_FILENO))
            term_->print("ds4-agent: " + o_.model + " in " + root_->path() + " (context " + std::to_string(engine_->ctx()) +
                             " tokens, " + std::string(format_->name()) + " format). /help lists commands; Ctrl+C "
                             "stops a reply, Ctrl+D leaves.\n",
                         false);
        if (!first.empty()) {
            turn(first);
            if (o_.non_interactive) return 0;
        }
        while (auto line = term_->read_line("> ")) {
            if (line->find_first_not_of(" \t\r") == std::string::npos) continue;
            if ((*line)[0] == '/') {
                if (!command(*line)) break;
            } else {
                turn(*line);
            }
        }
        return 0;
    }

private:
    void turn(const std::string& text) {
        agent::TurnReport r;
        term_->run([&] { r = agent_->turn(text, term_->cancel()); });
        if (!r.error.empty()) term_->print("ds4-agent: " + r.error + "\n", false);
        if (!r.sent) {
            if (r.error.empty()) term_->print("[interrupted: the message was not sent]\n", false);
            return;
        }
        if (r.cancelled) term_->print("[stopped]\n", false);
        char buf[256];
        std::snprintf(buf, sizeof buf,
                      "[context %zu/%lld tokens; prefilled %lld, reused %lld; %.1f t/s prefill, %.1f t/s "
                      "generation; %d tool calls]\n",
                      agent_->conversation().tokens().size(), (long long)engine_->ctx(), (long long)r.prefilled,
                      (long long)r.reused, r.prefill_seconds > 0 ? double(r.prefilled) / r.prefill_seconds : 0.0,
                      r.generate_seconds > 0 ? double(r.generated) / r.generate_seconds : 0.0, r.tool_calls);
        term_->print(buf, false);
    }

    bool command(const std::string& line);
    void history(int n);
    void list();

    const Options& o_;
    frontend::Started run_;
    std::unique_ptr<chat::ChatFormat> format_;
    std::unique_ptr<agent::Root> root_;
    std::unique_ptr<Terminal> term_;
    std::unique_ptr<agent::Tools> tools_;
    std::unique_ptr<speculative::Speculation> spec_;
    std::unique_ptr<engine::Drafter> drafter_;
    std::unique_ptr<engine::Engine> engine_;
    std::unique_ptr<agent::Agent> agent_;
    std::unique_ptr<agent::SessionStore> store_;
};

bool App::command(const std::string& line) {
    std::istringstream in(line);
    std::string cmd, arg;
    in >> cmd;
    std::getline(in >> std::ws, arg);
    try {
        if (cmd == "/quit" || cmd == "/exit") return false;
        if (cmd == "/help") {
            term_->print(kHelp);
        } else if (cmd == "/save") {
            std::string id;
            term_->run([&] { id = agent_->save(*store_); });
            if (!id.empty()) term_->print("saved session " + id + " in " + store_->dir() + "\n", false);
        } else if (cmd == "/list") {
            list();
        } else if (cmd == "/switch") {
            const std::string id = store_->find(arg);
            bool kv = false, ok = false;
            term_->run([&] {
                kv = agent_->resume(*store_, id);
                ok = true;
            });
            if (ok)
                term_->print("switched to session " + id + " (" + std::to_string(agent_->conversation().tokens().size()) +
                                 " tokens" + (kv ? ", KV state loaded: no prefill" : ", no KV state: the next turn prefills it") +
                                 ")\n",
                             false);
        } else if (cmd == "/del") {
            const std::string id = store_->find(arg);
            store_->remove(id);
            term_->print("deleted session " + id + "\n", false);
        } else if (cmd == "/strip") {
            const std::string id = store_->find(arg);
            const uint64_t freed = store_->strip(id);
            term_->print("stripped session " + id + " (" + std::to_string(freed) + " bytes of KV state dropped)\n", false);
        } else if (cmd == "/history") {
            history(arg.empty() ? 10 : std::max(1, std::atoi(arg.c_str())));
        } else if (cmd == "/compact") {
            term_->run([&] { agent_->compact(term_->cancel(), "/compact"); });
        } else if (cmd == "/new") {
            term_->run([&] { agent_->reset(); });
            term_->print("new session\n", false);
        } else if (cmd == "/think" || cmd == "/nothink") {
            const auto m = cmd == "/think" ? chat::ThinkingMode::High : chat::ThinkingMode::Off;
            term_->run([&] { agent_->set_thinking(m); });
            term_->print(std::string("reasoning ") + (m == chat::ThinkingMode::Off ? "off" : "on") + "\n", false);
        } else {
            term_->print("unknown command " + cmd + " (/help lists them)\n", false);
        }
    } catch (const Error& e) {
        term_->print("ds4-agent: " + cmd + ": " + e.what() + "\n", false);
    }
    return true;
}

void App::list() {
    const auto sessions = store_->list();
    if (sessions.empty()) term_->print("no saved sessions in " + store_->dir() + "\n");
    for (const auto& s : sessions) {
        char when[32] = "?";
        const std::time_t t = std::time_t(s.created);
        std::tm tm{};
        if (localtime_r(&t, &tm)) std::strftime(when, sizeof when, "%Y-%m-%d %H:%M", &tm);
        std::string l = s.id + "  " + when + "  " + std::to_string(s.tokens) + " tokens";
        if (s.stripped) l += " (stripped)";
        if (s.id == agent_->session_id()) l += " (current)";
        l += s.problem.empty() ? "  " + s.title : "  [" + s.problem + "]";
        term_->print(l + "\n");
    }
}

void App::history(int n) {
    const auto& msgs = agent_->conversation().messages();
    const size_t from = msgs.size() > size_t(n) ? msgs.size() - size_t(n) : 0;
    for (size_t i = from; i < msgs.size(); ++i) {
        const chat::Message& m = msgs[i];
        std::string text;
        switch (m.role) {
            case chat::Role::System:
            case chat::Role::Developer: continue;
            case chat::Role::User: text = "[user] " + m.content; break;
            case chat::Role::Assistant:
                text = "[assistant] " + m.content;
                for (const auto& c : m.tool_calls) text += "\n  * " + c.name + " " + c.arguments;
                break;
            case chat::Role::Tool: text = "[tool " + m.name + "] " + m.content.substr(0, m.content.find('\n')); break;
        }
        if (text.size() > 400) text = text.substr(0, 400) + "...";
        term_->print(text + "\n");
    }
}

}  // namespace
}  // namespace ds4::agent_cli

int main(int argc, char** argv) {
    const auto parsed = ds4::agent_cli::parse_options(argc, argv);
    if (parsed.exit_code) return *parsed.exit_code;
    return ds4::frontend::run_main("ds4-agent", [&] {
        const auto& o = parsed.options;
        if (!o.model_given && !std::filesystem::exists(o.model))
            ds4::fail("model file {} not found; write the small default model with scripts/run-default.sh and "
                      "pass -m models/default.gguf, or download a DeepSeek V4 Flash GGUF to {} (or pass -m FILE)",
                      o.model, o.model);
        ds4::agent_cli::App app(o);
        return app.main();
    });
}
