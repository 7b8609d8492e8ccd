// The agent's inference side (docs/AGENT.md): one user turn is a loop of replies and tool
// calls over one live engine session. Each reply is synced (prefilling only what the session
// lacks), generated and streamed through the chat format's parser; a reply that calls tools
// stops at the end of its tool-call block, the calls run (agent/tools.h), their results go in
// as the format's tool messages, and the model replies again, until a reply calls no tool.
//
// It runs on the inference thread and talks to the user only through Ui, whose methods the
// terminal front end (tools/ds4-agent) turns into events for its UI thread. Ctrl+C is the
// cancel flag: it stops a prefill (the turn's message is then not sent: the conversation is
// as before), a reply (what was generated stays, so the session stays consistent) or a
// waiting command (it goes on as a background job).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/conversation.h"
#include "agent/sessions.h"
#include "agent/tools.h"
#include "chat/format.h"
#include "engine/engine.h"

namespace ds4::agent {

class Ui {
public:
    virtual ~Ui() = default;
    virtual void prefill(int64_t done, int64_t total, double seconds) = 0;
    virtual void reasoning(std::string_view text) = 0;
    virtual void content(std::string_view text) = 0;
    virtual void end_reply() = 0;
    virtual void tool_call(const chat::ToolCall& call) = 0;
    virtual void tool_output(std::string_view text) = 0;  // a running command's output
    virtual void tool_result(const chat::ToolCall& call, const ToolResult& result) = 0;
    virtual void note(const std::string& text) = 0;        // status lines
    // A write or a command asks the user; blocks until answered.
    virtual bool approve(const std::string& tool, const std::string& what) = 0;
};

struct AgentOptions {
    std::string system;  // the whole system prompt (the agent's own text plus -sys)
    chat::ThinkingMode thinking = chat::ThinkingMode::High;
    sampling::SamplerParams sampling{};
    int64_t max_reply_tokens = 8192;  // one reply
    int max_steps = 64;               // replies in one user turn
    std::vector<std::string> script;  // test hook: replies to force instead of sampling
    std::string trace_path;           // --trace: everything the model sees and says
    int max_draft = 0;                // speculative drafts per step
    bool compaction = true;           // the automatic triggers (/compact works either way)
    std::vector<chat::Message> prefix{};  // --prefix-file: the history every conversation starts from
};

struct TurnReport {
    bool sent = true;       // false: stopped during the first prefill, nothing changed
    bool cancelled = false;
    int replies = 0;
    int tool_calls = 0;
    int64_t prefilled = 0, generated = 0;  // over every reply of the turn
    int64_t reused = 0;                    // positions the first reply found in the session
    double prefill_seconds = 0, generate_seconds = 0;
    std::string error;  // a turn that failed (context full, ...): said to the user
};

class Agent {
public:
    // `engine`, `format` and `tools` outlive the agent.
    Agent(engine::Engine& engine, const chat::ChatFormat& format, Tools& tools, AgentOptions options, Ui& ui);
    ~Agent();

    TurnReport turn(const std::string& user, const std::atomic<bool>* cancel);

    const Conversation& conversation() const { return conv_; }
    void set_thinking(chat::ThinkingMode m);
    // A fresh conversation (the engine keeps its cache: the next prompt reuses what matches).
    void reset();

    // Sessions: the conversation and the engine's state (synced to the conversation first).
    // save() gives the id; resume() makes a saved session the live one and says whether its
    // KV state came back (else the next turn prefills it). Throw ds4::Error.
    std::string save(const SessionStore& store);
    bool resume(const SessionStore& store, const std::string& id);
    const std::string& session_id() const { return id_; }

    // Compaction (docs/AGENT.md, "Compaction"): the older part of the conversation is
    // summarised by the model (at most 4096 tokens, and ctx/8) into the system prompt, and a
    // verbatim tail of at most ctx/10 tokens (and 50000), starting at a user message, is kept.
    // Returns false when nothing was compacted (too little history, or Ctrl+C: the
    // conversation is then unchanged). `why` is said to the user.
    bool compact(const std::atomic<bool>* cancel, const std::string& why);
    // The soft trigger: at least 85% of the context used, or at most min(8192, ctx/8) left.
    bool wants_compaction() const;

private:
    struct Reply;
    Reply reply(const std::atomic<bool>* cancel, TurnReport& report);
    void run_tools(const std::vector<chat::ToolCall>& calls, const std::atomic<bool>* cancel, TurnReport& report);
    std::optional<std::string> summarise(const std::string& text, const std::atomic<bool>* cancel);
    void trace(const char* what, std::string_view text);
    void trace_tokens(const char* what);

    engine::Engine& engine_;
    const chat::ChatFormat& format_;
    Tools& tools_;
    AgentOptions options_;
    Ui& ui_;
    Conversation conv_;
    size_t script_next_ = 0;
    std::string id_;           // "" until the first message
    uint64_t created_ = 0;
    std::FILE* trace_ = nullptr;
    size_t traced_ = 0;        // conversation tokens already written to the trace
};

}  // namespace ds4::agent
