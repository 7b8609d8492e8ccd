#include "line_editor.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

// libedit's readline-compatible interface (editing, recall) and its native history API (saving).
#include <editline/readline.h>
#include <histedit.h>

#include "common/error.h"
#include "common/file_io.h"

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
    if (history_path_.empty()) return;
    read_history(history_path_.c_str());  // a missing file is fine
    saved_ = history_init();
    HistEvent ev;
    if (saved_) {
        history(saved_, &ev, H_SETSIZE, max_entries);
        history(saved_, &ev, H_LOAD, history_path_.c_str());
    }
}

LineEditor::~LineEditor() {
    if (saved_) history_end(saved_);
}

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
    if (!saved_) return;
    HistEvent ev;
    history(saved_, &ev, H_ENTER, line.c_str());
    try {
        save();
        save_failing_ = false;
    } catch (const Error& e) {
        if (!save_failing_)
            std::fprintf(stderr, "ds4: cannot save the history: %s (the previous file is kept)\n",
                         e.what());
        save_failing_ = true;
    }
}

// The whole history into a new file that replaces the old one only when complete.
void LineEditor::save() {
    AtomicFile out(history_path_);
    const int fd = dup(out.fd());
    std::FILE* fp = fd < 0 ? nullptr : fdopen(fd, "w");
    if (!fp) {
        if (fd >= 0) close(fd);
        fail("{}: {}", history_path_, std::strerror(errno));
    }
    // libedit ignores its own fprintf results: the stream's error flag tells.
    HistEvent ev;
    errno = 0;
    const int n = history(saved_, &ev, H_SAVE_FP, fp);
    bool ok = n >= 0 && !std::ferror(fp);
    int e = ok ? 0 : errno;
    if (ok && std::fflush(fp) != 0) ok = false, e = errno;
    if (std::fclose(fp) != 0 && ok) ok = false, e = errno;
    if (!ok) fail("{}: write failed: {}", history_path_, std::strerror(e ? e : EIO));
    out.commit();
}

}  // namespace ds4::cli
