#include "tui.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace ds4::eval_cli {
namespace {

termios g_saved;
bool g_raw = false;
std::atomic<bool> g_quit{false};

void restore_terminal() {
    if (!g_raw) return;
    const char* s = "\x1b[0m\x1b[?25h\x1b[?1049l";
    (void)!::write(STDOUT_FILENO, s, std::strlen(s));
    ::tcsetattr(STDIN_FILENO, TCSANOW, &g_saved);
    g_raw = false;
}

void on_interrupt(int) { g_quit = true; }

void on_fatal(int sig) {
    restore_terminal();
    ::signal(sig, SIG_DFL);
    ::raise(sig);
}

long long now_ms() {
    return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Columns a UTF-8 byte takes (continuation bytes none).
int cols(char ch) { return (static_cast<unsigned char>(ch) & 0xC0) == 0x80 ? 0 : 1; }

const char* color(eval::Status s) {
    switch (s) {
        case eval::Status::Passed: return "\x1b[32m";
        case eval::Status::Failed:
        case eval::Status::Error: return "\x1b[31m";
        case eval::Status::Running: return "\x1b[33m";
        case eval::Status::Stopped: return "\x1b[35m";
        case eval::Status::Pending: return "\x1b[90m";
    }
    return "";
}

}  // namespace

Tui::Tui(const std::vector<eval::Case>& cases, std::string title)
    : cases_(cases), title_(std::move(title)), status_(cases.size(), eval::Status::Pending), picked_(cases.size()) {
    ::tcgetattr(STDIN_FILENO, &g_saved);
    termios raw = g_saved;
    raw.c_lflag &= ~tcflag_t(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    ::tcsetattr(STDIN_FILENO, TCSANOW, &raw);
    g_raw = true;
    std::fputs("\x1b[?1049h\x1b[?25l\x1b[2J", stdout);
    std::fflush(stdout);
    std::atexit(restore_terminal);
    ::signal(SIGINT, on_interrupt);
    ::signal(SIGTERM, on_fatal);
    ::signal(SIGSEGV, on_fatal);
    ::signal(SIGABRT, on_fatal);
    reader_ = std::thread([this] { reader(); });
}

Tui::~Tui() {
    stop_ = true;
    reader_.join();
    std::fflush(stdout);
    restore_terminal();
    ::signal(SIGINT, SIG_DFL);
}

void Tui::reader() {
    std::string pending;
    while (!stop_) {
        pollfd p{STDIN_FILENO, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        char buf[64];
        const ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
        if (n <= 0) continue;
        pending.append(buf, size_t(n));
        std::lock_guard lock(m_);
        while (!pending.empty()) {
            if (pending[0] == '\x1b') {
                if (pending.size() < 3) break;
                if (pending[1] == '[' && pending[2] == 'A') keys_.push_back(Key::Up);
                if (pending[1] == '[' && pending[2] == 'B') keys_.push_back(Key::Down);
                pending.erase(0, 3);
                continue;
            }
            const char c = pending[0];
            pending.erase(0, 1);
            if (c == '\r' || c == '\n') keys_.push_back(Key::Enter);
            else if (c == 'p' || c == 'P' || c == ' ') keys_.push_back(Key::Pause);
            else if (c == 'q' || c == 'Q') keys_.push_back(Key::Quit);
            else if (c == 'k') keys_.push_back(Key::Up);
            else if (c == 'j') keys_.push_back(Key::Down);
        }
    }
}

std::vector<Key> Tui::keys() {
    std::lock_guard lock(m_);
    std::vector<Key> out(keys_.begin(), keys_.end());
    keys_.clear();
    if (g_quit.exchange(false)) out.push_back(Key::Quit);
    return out;
}

void Tui::move_selection(int delta) {
    const int n = int(cases_.size());
    selected_ = std::max(0, std::min(n - 1, selected_ + delta));
}

void Tui::set_status(size_t i, eval::Status s, const std::string& picked) {
    status_[i] = s;
    picked_[i] = picked;
}

void Tui::begin_case(size_t i) {
    running_ = int(i);
    status_[i] = eval::Status::Running;
    text_.clear();
    dim_.clear();
}

void Tui::stream(std::string_view text, bool reasoning) {
    text_ += text;
    dim_.insert(dim_.end(), text.size(), reasoning);
}

void Tui::set_phase(std::string phase) { phase_ = std::move(phase); }

void Tui::draw_left(int rows, int width) {
    // Keep the selected (or running) case in view.
    const int focus = selected_;
    const int first = std::max(0, std::min(focus - (rows - 1) / 2, int(cases_.size()) - rows));
    for (int r = 0; r < rows; ++r) {
        std::printf("\x1b[%d;1H\x1b[0m", r + 2);
        const int i = first + r;
        std::string line;
        if (i >= 0 && i < int(cases_.size())) {
            char head[32];
            std::snprintf(head, sizeof head, "%c%c%3d %-7s ", i == selected_ ? '>' : ' ', i == queued_ ? '+' : ' ', i + 1,
                          eval::to_string(status_[size_t(i)]));
            line = head + cases_[size_t(i)].suite + "/" + cases_[size_t(i)].id;
            if (!picked_[size_t(i)].empty()) line += " " + picked_[size_t(i)] + "/" + cases_[size_t(i)].expected;
            std::fputs(color(status_[size_t(i)]), stdout);
        }
        if (int(line.size()) > width - 1) line.resize(size_t(width - 1));
        line.resize(size_t(width - 1), ' ');
        std::fputs(line.c_str(), stdout);
        std::fputs("\x1b[0m|", stdout);
    }
}

void Tui::draw_right(int rows, int col, int width) {
    // Wrap the reply into lines of `width` columns and show the last `rows` of them.
    struct Line {
        size_t from, to;
    };
    std::vector<Line> lines{{0, 0}};
    int at_col = 0;
    for (size_t i = 0; i < text_.size(); ++i) {
        if (text_[i] == '\n') {
            lines.back().to = i;
            lines.push_back({i + 1, i + 1});
            at_col = 0;
            continue;
        }
        if (cols(text_[i]) && at_col == width) {
            lines.back().to = i;
            lines.push_back({i, i});
            at_col = 0;
        }
        at_col += cols(text_[i]);
        lines.back().to = i + 1;
    }
    const size_t first = lines.size() > size_t(rows) ? lines.size() - size_t(rows) : 0;
    for (int r = 0; r < rows; ++r) {
        std::printf("\x1b[%d;%dH\x1b[0m\x1b[K", r + 2, col);
        const size_t li = first + size_t(r);
        if (li >= lines.size()) continue;
        bool dim = false;
        for (size_t i = lines[li].from; i < lines[li].to; ++i) {
            if (dim_[i] != dim) {
                dim = dim_[i];
                std::fputs(dim ? "\x1b[90m" : "\x1b[0m", stdout);
            }
            if (text_[i] != '\t' && text_[i] != '\r') std::fputc(text_[i], stdout);
            else std::fputc(' ', stdout);
        }
    }
}

void Tui::draw(bool throttled) {
    const long long t = now_ms();
    if (throttled && t - last_draw_ms_ < 50) return;
    last_draw_ms_ = t;
    winsize ws{};
    int width = 100, height = 30;
    if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20 && ws.ws_row > 5) {
        width = ws.ws_col;
        height = ws.ws_row;
    }
    const int left = std::min(44, width / 3);
    const int rows = height - 2;
    int passed = 0, done = 0;
    for (eval::Status s : status_) {
        passed += s == eval::Status::Passed;
        done += s == eval::Status::Passed || s == eval::Status::Failed || s == eval::Status::Error;
    }
    std::printf("\x1b[1;1H\x1b[0m\x1b[1m\x1b[K%s  passed %d/%d of %zu\x1b[0m", title_.c_str(), passed, done, cases_.size());
    draw_left(rows, left);
    draw_right(rows, left + 2, width - left - 2);
    std::string status = "p pause  q quit  Up/Down select  Enter run next   " + phase_ + (paused_ ? "  [paused]" : "");
    if (int(status.size()) > width - 1) status.resize(size_t(width - 1));
    std::printf("\x1b[%d;1H\x1b[0m\x1b[7m\x1b[K%s\x1b[0m", height, status.c_str());
    std::fflush(stdout);
}

}  // namespace ds4::eval_cli
