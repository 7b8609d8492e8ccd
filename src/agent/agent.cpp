#include "agent/agent.h"

#include <chrono>
#include <ctime>

#include "common/error.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace ds4::agent {

struct Agent::Reply {
    bool prefilled = false;  // false: Ctrl+C during the prefill, nothing generated
    engine::StopReason reason = engine::StopReason::Eos;
    std::vector<int32_t> ids;
    chat::ParsedOutput parsed;
};

Agent::Agent(engine::Engine& engine, const chat::ChatFormat& format, Tools& tools, AgentOptions options, Ui& ui)
    : engine_(engine),
      format_(format),
      tools_(tools),
      options_(std::move(options)),
      ui_(ui),
      conv_(format, options_.system,
            {.tools_json = Tools::specs_json(), .thinking = options_.thinking, .context_size = engine.ctx()}) {
    conv_.seed(options_.prefix);
    if (!options_.trace_path.empty()) {
        trace_ = std::fopen(options_.trace_path.c_str(), "a");
        if (!trace_) fail("--trace {}: cannot open for writing", options_.trace_path);
    }
}

Agent::~Agent() {
    if (trace_) std::fclose(trace_);
}

void Agent::trace(const char* what, std::string_view text) {
    if (!trace_) return;
    std::fprintf(trace_, "=== %s ===\n", what);
    std::fwrite(text.data(), 1, text.size(), trace_);
    std::fputc('\n', trace_);
    std::fflush(trace_);
}

void Agent::trace_tokens(const char* what) {
    const auto& t = conv_.tokens();
    if (!trace_ || traced_ >= t.size()) {
        traced_ = std::min(traced_, t.size());
        return;
    }
    const std::span<const int32_t> fresh(t.data() + traced_, t.size() - traced_);
    trace(what, engine_.tokenizer().decode(fresh));
    traced_ = t.size();
}

void Agent::set_thinking(chat::ThinkingMode m) { conv_.set_thinking(m); options_.thinking = m; }

void Agent::reset() {
    conv_ = Conversation(format_, options_.system,
                         {.tools_json = Tools::specs_json(), .thinking = options_.thinking, .context_size = engine_.ctx()});
    conv_.seed(options_.prefix);
    id_.clear();
    created_ = 0;
    traced_ = 0;
}

Agent::Reply Agent::reply(const std::atomic<bool>* cancel, TurnReport& report) {
    Reply r;
    const std::vector<int32_t>& tokens = conv_.tokens();
    if (int64_t(tokens.size()) + 1 >= engine_.ctx())
        fail("the conversation needs {} tokens but the context holds {} (/new starts a fresh one; -c sets "
             "a larger context)",
             tokens.size() + 1, engine_.ctx());
    const auto t0 = std::chrono::steady_clock::now();
    const auto progress = [&](int64_t done, int64_t total) {
        ui_.prefill(done, total, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    const engine::SyncResult s = engine_.sync(tokens, progress, cancel);
    report.prefilled += s.evaluated;
    if (report.replies == 0) report.reused = s.reused;  // what the turn found in the session
    report.prefill_seconds += s.seconds;
    if (s.cancelled) return r;
    r.prefilled = true;

    const chat::OutputParserOptions po{.thinking = conv_.thinking() != chat::ThinkingMode::Off,
                                       .tools = true,
                                       .tools_json = Tools::specs_json()};
    const std::unique_ptr<chat::StreamParser> parser = format_.new_parser(po);
    tokenizer::StreamDecoder decoder(engine_.tokenizer());
    std::optional<std::vector<int32_t>> forced;
    if (script_next_ < options_.script.size())
        forced = engine_.tokenizer().encode(options_.script[script_next_++], tokenizer::Special::Match);
    std::string text;
    std::vector<chat::OutputEvent> events;
    const auto show = [&] {
        for (const auto& e : events) {
            if (e.kind == chat::OutputEvent::Kind::Reasoning) ui_.reasoning(e.text);
            else if (e.kind == chat::OutputEvent::Kind::Content) ui_.content(e.text);
        }
        events.clear();
    };
    const int64_t room = engine_.ctx() - int64_t(tokens.size()) - 1;
    const engine::GenerateOptions g{.sampling = options_.sampling,
                                    .max_tokens = std::max<int64_t>(1, std::min(options_.max_reply_tokens, room)),
                                    .cancel = cancel,
                                    .forced = forced ? &*forced : nullptr,
                                    .max_draft = options_.max_draft};
    const engine::GenerateResult gr = engine_.generate(g, [&](int32_t id) {
        r.ids.push_back(id);
        const std::string piece = decoder.push(id);
        text += piece;
        parser->feed(piece, events);
        show();
        return !parser->block_closed();  // a complete tool-call block: run it now
    });
    const std::string rest = decoder.flush();
    text += rest;
    parser->feed(rest, events);
    parser->finish(events);
    show();
    ui_.end_reply();
    r.reason = gr.reason;
    report.generated += gr.emitted;
    report.generate_seconds += gr.seconds;
    r.parsed = format_.parse(text, po);
    return r;
}

void Agent::run_tools(const std::vector<chat::ToolCall>& calls, const std::atomic<bool>* cancel, TurnReport& report) {
    std::vector<chat::Message> results;
    for (const chat::ToolCall& c : calls) {
        ui_.tool_call(c);
        ToolResult res;
        if (cancel && cancel->load())
            res = {"error: not run: the user pressed Ctrl+C", true};
        else
            res = tools_.call(c.name, c.arguments, cancel, [&](std::string_view s) { ui_.tool_output(s); });
        ++report.tool_calls;
        ui_.tool_result(c, res);
        results.push_back({.role = chat::Role::Tool, .content = res.text, .tool_call_id = c.id, .name = c.name});
    }
    conv_.add(results);
}

TurnReport Agent::turn(const std::string& user, const std::atomic<bool>* cancel) {
    TurnReport rep;
    if (options_.compaction && wants_compaction()) compact(cancel, "the context is filling up");
    const Conversation before = conv_;
    const bool fresh = id_.empty();
    if (fresh) {
        created_ = uint64_t(std::time(nullptr));
        id_ = agent::session_id(user, created_);
    }
    const auto undo = [&] {
        conv_ = before;
        rep.sent = false;
        if (fresh) id_.clear();
    };
    try {
        conv_.add({{.role = chat::Role::User, .content = user}});
    } catch (const Error& e) {
        rep.error = e.what();
        undo();
        return rep;
    }
    for (int step = 0;; ++step) {
        if (step >= options_.max_steps) {
            rep.error = "stopped after " + std::to_string(step) + " replies in one turn";
            break;
        }
        trace_tokens("prompt");
        Reply r;
        try {
            r = reply(cancel, rep);
        } catch (const Error& e) {
            rep.error = e.what();
            if (step == 0) undo();
            break;
        }
        if (!r.prefilled) {
            rep.cancelled = true;
            if (step == 0) undo();
            break;
        }
        ++rep.replies;
        const std::vector<chat::ToolCall> calls = conv_.add_reply(r.ids, r.parsed);
        trace_tokens("reply");
        if (r.reason == engine::StopReason::Cancelled) {
            rep.cancelled = true;
            break;
        }
        if (calls.empty()) break;
        try {
            run_tools(calls, cancel, rep);
            // The hard trigger: the results leave no room for a reply.
            if (options_.compaction && int64_t(conv_.tokens().size()) + 64 >= engine_.ctx() &&
                compact(cancel, "a tool result does not fit") && conv_.empty())
                conv_.add({{.role = chat::Role::User, .content = "Continue the task from the summary."}});
        } catch (const Error& e) {
            rep.error = e.what();
            break;
        }
        if (cancel && cancel->load()) {
            rep.cancelled = true;
            break;
        }
    }
    return rep;
}

std::string Agent::save(const SessionStore& store) {
    if (conv_.empty() || id_.empty()) fail("nothing to save yet");
    engine_.sync(conv_.tokens());  // the state holds exactly the conversation
    SessionData s;
    s.id = id_;
    s.created = created_;
    for (const auto& m : conv_.messages())
        if (m.role == chat::Role::User) {
            s.title = m.content.substr(0, std::min(m.content.find('\n'), size_t(60)));
            break;
        }
    s.messages = conv_.messages();
    s.tokens = conv_.tokens();
    s.state = engine_.save_state();
    store.save(s, engine_.ctx());
    return id_;
}

bool Agent::resume(const SessionStore& store, const std::string& id) {
    SessionData s = store.load(id);
    if (int64_t(s.tokens.size()) + 1 >= engine_.ctx())
        fail("session {} holds {} tokens: it needs a larger context than {} (-c)", s.id, s.tokens.size(),
             engine_.ctx());
    bool kv = false;
    if (!s.state.empty()) {
        engine_.load_state(s.state);
        kv = true;
    }
    conv_.restore(std::move(s.messages), std::move(s.tokens));
    id_ = s.id;
    created_ = s.created;
    traced_ = conv_.tokens().size();
    return kv;
}

}  // namespace ds4::agent
