// A terminal for tests that drive a program as a user would (ds4-agent, ds4-eval): tmux runs
// it in a 200x50 pane of a tmux server of its own, the test types (send-keys) and reads the
// screen (capture-pane). Tests skip themselves when tmux is missing.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

namespace ds4::test {

using namespace std::chrono_literals;

// `s` single-quoted for sh.
inline std::string quote(const std::string& s) {
    std::string q = "'";
    for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return q + "'";
}

// Runs `cmd` with sh; its stdout.
inline std::string sh(const std::string& cmd) {
    std::string out;
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
    return out;
}

// One tmux server of our own (its own socket), one pane running `command`.
class Tmux {
public:
    explicit Tmux(const std::string& command) {
        static std::atomic<int> n{0};
        socket_ = "ds4-test-" + std::to_string(::getpid()) + "-" + std::to_string(n++);
        sh(tmux() + " -f /dev/null start-server \\; set -g history-limit 50000 \\; set -g remain-on-exit on \\; "
                    "new-session -d -s t -x 200 -y 50 " + quote(command));
    }
    ~Tmux() { sh(tmux() + " kill-server 2>/dev/null"); }
    void type(const std::string& text) {
        sh(tmux() + " send-keys -t t -l " + quote(text));
        sh(tmux() + " send-keys -t t Enter");
    }
    void key(const std::string& k) { sh(tmux() + " send-keys -t t " + k); }
    // Everything the pane is sent from now on, escape sequences included, into `path`.
    void record(const std::string& path) { sh(tmux() + " pipe-pane -t t " + quote("cat >> " + quote(path))); }
    std::string screen() { return sh(tmux() + " capture-pane -p -J -t t -S - -E -"); }
    // Waits until `needle` shows after the last match; true when it did.
    bool expect(const std::string& needle, std::chrono::seconds timeout = 60s) {
        const auto end = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < end) {
            const std::string s = screen();
            const size_t at = s.find(needle, mark_);
            if (at != std::string::npos) {
                mark_ = at + needle.size();
                return true;
            }
            std::this_thread::sleep_for(100ms);
        }
        return false;
    }
    // The screen after the last match.
    std::string rest() { return screen().substr(std::min(mark_, screen().size())); }
    bool dead() { return sh(tmux() + " display -p -t t '#{pane_dead}'").find('1') != std::string::npos; }

private:
    std::string tmux() const { return "tmux -L " + socket_; }
    std::string socket_;
    size_t mark_ = 0;
};

}  // namespace ds4::test
