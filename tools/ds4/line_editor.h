// Reading the interactive chat's input lines. On a terminal: libedit line editing with a
// persistent history (spec/PRODUCT.md §3.2: ~/.ds4_history, 512 entries); otherwise plain lines from
// stdin, so the chat can be scripted through a pipe.
//
// The history file is replaced whole after each line (common/file_io.h: AtomicFile), never
// rewritten in place: a full disk once cut it mid-entry without a word. A failed save is
// reported on stderr (once until a save works again) and leaves the previous file as it was.
#pragma once

#include <optional>
#include <string>

typedef struct history History;  // libedit's <histedit.h>

namespace ds4::cli {

class LineEditor {
public:
    // history_path: where the history lives ("" = none). Only used on a terminal.
    explicit LineEditor(std::string history_path, int max_entries = 512);
    ~LineEditor();
    LineEditor(const LineEditor&) = delete;
    LineEditor& operator=(const LineEditor&) = delete;

    // The next line without its newline; nullopt at the end of input (Ctrl+D, EOF).
    std::optional<std::string> read(const char* prompt);
    // Remembers a line for up-arrow recall and saves the history file.
    void remember(const std::string& line);
    bool interactive() const { return tty_; }

private:
    void save();

    bool tty_;
    std::string history_path_;
    // The entries to save, in libedit's own History (its readline layer offers no way to
    // write to a stream whose errors we can see).
    History* saved_ = nullptr;
    bool save_failing_ = false;  // the last save failed (and said so)
};

// $HOME/.ds4_history, or "" when HOME is not set.
std::string default_history_path();

}  // namespace ds4::cli
