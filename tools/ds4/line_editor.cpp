#include "line_editor.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

// libedit's readline-compatible interface.
#include <editline/readline.h>

namespace ds4::cli {

std::string default_history_path() {
    const char* home = std::getenv("HOME");
    return home && *home ? std::string(home) + "/.ds4_history" : std::string();
}

LineEditor::LineEditor(std::string history_path, int max_entries)
    : tty_(isatty(STDIN_FILENO) != 0 && isatty(STDOUT_FILENO) != 0),
      history_path_(std::move(history_path)) {
    if (!tty_) return;
    using_history();
    stifle_history(max_entries);
    if (!history_path_.empty()) read_history(history_path_.c_str());  // a missing file is fine
}

LineEditor::~LineEditor() = default;

std::optional<std::string> LineEditor::read(const char* prompt) {
    if (tty_) {
        char* line = readline(prompt);
        if (!line) return std::nullopt;
        std::string s(line);
        std::free(line);
        return s;
    }
    char* buf = nullptr;
    size_t cap = 0;
    const ssize_t n = getline(&buf, &cap, stdin);
    if (n < 0) {
        std::free(buf);
        return std::nullopt;
    }
    std::string s(buf, size_t(n));
    std::free(buf);
    if (!s.empty() && s.back() == '\n') s.pop_back();
    if (!s.empty() && s.back() == '\r') s.pop_back();
    return s;
}

void LineEditor::remember(const std::string& line) {
    if (!tty_ || line.empty()) return;
    add_history(line.c_str());
    if (!history_path_.empty()) write_history(history_path_.c_str());
}

}  // namespace ds4::cli
