#include "terminal.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace ds4::agent_cli {
namespace {

std::atomic<bool> g_cancel{false};
std::atomic<bool> g_interrupted{false};  // a Ctrl+C since the UI thread last looked

extern "C" void on_sigint(int) {
    g_cancel.store(true);
    g_interrupted.store(true);
}

constexpr const char* kDim = "\x1b[2m";
constexpr const char* kReset = "\x1b[0m";
constexpr const char* kTool = "\x1b[36m";

// At most `lines` lines of `s`, and how many were left out.
std::string preview(const std::string& s, int lines) {
    size_t at = 0;
    for (int i = 0; i < lines && at < s.size(); ++i) {
        const size_t nl = s.find('\n', at);
        if (nl == std::string::npos) return s;
        at = nl + 1;
    }
    if (at >= s.size()) return s;
    size_t rest = 0;
    for (size_t i = at; i < s.size(); ++i) rest += s[i] == '\n';
    if (s.back() != '\n') ++rest;
    return s.substr(0, at) + "... (" + std::to_string(rest) + " more lines)\n";
}

}  // namespace

Terminal::Terminal(bool yes, bool ask) : tty_(isatty(STDOUT_FILENO) != 0), yes_(yes), ask_(ask) {
    struct sigaction sa {};
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;  // no SA_RESTART: a read at the prompt returns EINTR
    sigaction(SIGINT, &sa, nullptr);
    worker_ = std::thread([this] {
        for (;;) {
            std::function<void()> job;
            {
                std::unique_lock l(m_);
                cv_.wait(l, [&] { return stop_ || !jobs_.empty(); });
                if (jobs_.empty()) return;
                job = std::move(jobs_.front());
                jobs_.pop_front();
            }
            try {
                job();
            } catch (const Error& e) {
                post({"ds4-agent: " + std::string(e.what()) + "\n", false});
            } catch (const std::exception& e) {
                post({"ds4-agent: internal error: " + std::string(e.what()) + "\n", false});
            }
            post({.done = true});
        }
    });
}

Terminal::~Terminal() {
    {
        std::lock_guard l(m_);
        stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
}

const std::atomic<bool>* Terminal::cancel() const { return &g_cancel; }

void Terminal::print(const std::string& text, bool out) {
    std::FILE* f = out ? stdout : stderr;
    std::fwrite(text.data(), 1, text.size(), f);
    std::fflush(f);
}

void Terminal::post(Event e) {
    {
        std::lock_guard l(m_);
        events_.push_back(std::move(e));
    }
    cv_.notify_all();
}

bool Terminal::answer(const std::string& question) {
    for (;;) {
        print(question, true);
        const std::optional<std::string> line = read_line("");
        if (!line) return false;
        if (g_cancel.load()) return false;
        if (*line == "y" || *line == "Y" || *line == "yes") return true;
        if (*line == "a" || *line == "A") {
            always_ = true;
            return true;
        }
        if (line->empty() || *line == "n" || *line == "N" || *line == "no") return false;
    }
}

void Terminal::run(const std::function<void()>& job) {
    g_cancel = false;
    g_interrupted = false;
    {
        std::lock_guard l(m_);
        jobs_.push_back(job);
    }
    cv_.notify_all();
    for (;;) {
        Event e;
        {
            std::unique_lock l(m_);
            cv_.wait_for(l, std::chrono::milliseconds(100), [&] { return !events_.empty(); });
            if (events_.empty()) continue;
            e = std::move(events_.front());
            events_.pop_front();
        }
        if (e.done) return;
        if (!e.text.empty()) print(e.text, e.out);
        if (e.question) e.question->set_value(always_ || answer(e.text.empty() ? "allow? [y/N/a] " : ""));
    }
}

std::optional<std::string> Terminal::read_line(const char* prompt) {
    if (isatty(STDIN_FILENO) && prompt && *prompt) print(prompt, true);
    std::string line;
    for (;;) {
        char c;
        const ssize_t n = ::read(STDIN_FILENO, &c, 1);
        if (n == 1) {
            if (c == '\n') return line;
            line.push_back(c);
            continue;
        }
        if (n < 0 && errno == EINTR) {
            if (g_interrupted.exchange(false)) {
                print("\n(Ctrl+D or /quit leaves)\n", false);
                return std::string();
            }
            continue;
        }
        if (!line.empty()) return line;  // a last line without a newline
        return std::nullopt;
    }
}

void Terminal::style(bool dim) {
    if (!tty_ || dim == dim_) return;
    post({dim ? kDim : kReset});
    dim_ = dim;
}

void Terminal::prefill(int64_t done, int64_t total, double seconds) {
    if (!tty_ || total <= 0) return;
    const int width = 30;
    const int fill = int(width * done / total);
    char buf[160];
    std::snprintf(buf, sizeof buf, "\r\x1b[Kprefill [%s%s] %lld/%lld tokens, %.0f t/s", std::string(size_t(fill), '#').c_str(),
                  std::string(size_t(width - fill), '.').c_str(), (long long)done, (long long)total,
                  seconds > 0 ? double(done) / seconds : 0.0);
    post({buf, false});
    progress_shown_ = true;
}

void Terminal::reasoning(std::string_view text) {
    if (progress_shown_) {
        post({"\r\x1b[K", false});
        progress_shown_ = false;
    }
    style(true);
    in_reasoning_ = true;
    post({std::string(text)});
    if (!text.empty()) at_line_start_ = text.back() == '\n';
}

void Terminal::content(std::string_view text) {
    if (progress_shown_) {
        post({"\r\x1b[K", false});
        progress_shown_ = false;
    }
    if (in_reasoning_ && !at_line_start_) post({"\n"});  // the answer starts on a line of its own
    in_reasoning_ = false;
    style(false);
    post({std::string(text)});
    if (!text.empty()) at_line_start_ = text.back() == '\n';
}

void Terminal::end_reply() {
    if (progress_shown_) {
        post({"\r\x1b[K", false});
        progress_shown_ = false;
    }
    style(false);
    if (!at_line_start_) post({"\n"});
    at_line_start_ = true;
    in_reasoning_ = false;
}

void Terminal::tool_call(const chat::ToolCall& call) {
    const std::string args = call.arguments.size() > 300 ? call.arguments.substr(0, 300) + "..." : call.arguments;
    style(false);
    post({std::string(tty_ ? kTool : "") + "* " + call.name + " " + args + (tty_ ? kReset : "") + "\n"});
}

void Terminal::tool_output(std::string_view text) {
    // From the command's reader thread: its last line, refreshed in place on a terminal.
    if (!tty_) return;
    live_ += text;
    if (live_.size() > 4096) live_.erase(0, live_.size() - 4096);
    // At most ten refreshes a second: a flooding command must not flood the event queue.
    const auto now = std::chrono::steady_clock::now();
    if (now - live_at_ < std::chrono::milliseconds(100)) return;
    live_at_ = now;
    std::string_view l(live_);
    while (!l.empty() && (l.back() == '\n' || l.back() == '\r')) l.remove_suffix(1);
    if (const size_t nl = l.find_last_of("\r\n"); nl != std::string_view::npos) l.remove_prefix(nl + 1);
    std::string shown(l.substr(0, 100));
    for (char& c : shown)
        if (static_cast<unsigned char>(c) < 0x20) c = ' ';
    post({std::string("\r\x1b[K") + kDim + "  | " + shown + kReset, false});
    live_shown_ = true;
}

void Terminal::tool_result(const chat::ToolCall& call, const agent::ToolResult& result) {
    (void)call;
    if (live_shown_.exchange(false)) post({"\r\x1b[K", false});
    live_.clear();
    std::string s = preview(result.text, 12);
    if (s.empty() || s.back() != '\n') s += "\n";
    post({std::string(tty_ ? kDim : "") + s + (tty_ ? kReset : "")});
    dim_ = false;
    at_line_start_ = true;
}

void Terminal::note(const std::string& text) { post({text + "\n", false}); }

bool Terminal::approve(const std::string& tool, const std::string& what) {
    if (yes_) return true;
    if (!ask_) {
        note("ds4-agent: refused (" + what + "): run with --yes to allow writes and commands");
        return false;
    }
    std::promise<bool> answer;
    std::future<bool> f = answer.get_future();
    post({"allow " + tool + "? " + what + " [y/N/a(lways)] ", true, &answer});
    return f.get();
}

}  // namespace ds4::agent_cli
