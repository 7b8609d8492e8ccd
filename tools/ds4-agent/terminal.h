// ds4-agent's two threads: the UI thread (main) owns the terminal, reads the user's lines and
// prints; the inference thread runs the engine (every job that touches it: turns, /save,
// /switch, ...). The inference side reports through agent::Ui, whose calls become events the
// UI thread prints as they come: the prefill progress bar, reasoning dimmed, the reply, tool
// calls and their results, and permission questions it answers from the keyboard.
//
// Ctrl+C (SIGINT) sets cancel(): it stops a prefill, a reply or a waiting command; at the
// prompt it only clears the line (Ctrl+D or /quit leave).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "agent/agent.h"

namespace ds4::agent_cli {

class Terminal final : public agent::Ui {
public:
    // yes: approve everything; ask: questions go to the keyboard (else they are refused).
    Terminal(bool yes, bool ask);
    ~Terminal() override;

    // UI thread: runs `job` on the inference thread, printing its events until it returns.
    // The cancel flag is cleared first.
    void run(const std::function<void()>& job);
    // UI thread: the next input line (a prompt is shown on a terminal); nullopt at the end of
    // input. A Ctrl+C while reading gives "" and says how to leave.
    std::optional<std::string> read_line(const char* prompt);
    const std::atomic<bool>* cancel() const;
    bool tty() const { return tty_; }
    // UI thread: prints (out: stdout, else stderr).
    void print(const std::string& text, bool out = true);

    // agent::Ui, from the inference thread.
    void prefill(int64_t done, int64_t total, double seconds) override;
    void reasoning(std::string_view text) override;
    void content(std::string_view text) override;
    void end_reply() override;
    void tool_call(const chat::ToolCall& call) override;
    void tool_output(std::string_view text) override;
    void tool_result(const chat::ToolCall& call, const agent::ToolResult& result) override;
    void note(const std::string& text) override;
    bool approve(const std::string& tool, const std::string& what) override;

private:
    struct Event {
        std::string text{};
        bool out = true;
        std::promise<bool>* question = nullptr;  // approve(): the UI thread answers
        bool done = false;                       // the job returned
    };
    void post(Event e);
    void style(bool dim);  // inference thread: switch the reply's dimming
    bool answer(const std::string& question);

    bool tty_;
    bool yes_, ask_;
    bool always_ = false;       // the user answered "a": yes from now on
    std::string live_;          // a running command's recent output (its reader thread)
    std::atomic<bool> live_shown_{false};
    std::chrono::steady_clock::time_point live_at_{};
    bool dim_ = false, at_line_start_ = true, progress_shown_ = false, in_reasoning_ = false;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Event> events_;
    std::deque<std::function<void()>> jobs_;
    bool stop_ = false;
    std::thread worker_;
};

}  // namespace ds4::agent_cli
