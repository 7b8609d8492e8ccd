#include "common/log.h"

#include <atomic>
#include <mutex>
#include <string>

namespace ds4::log {
namespace {

struct Sink {
    std::mutex mu;
    std::FILE* file = nullptr;  // nullptr: stderr (read at each write, not at static init)
    Callback callback;          // set: takes the lines instead of the file
};

Sink& sink() {
    static Sink s;
    return s;
}

std::atomic<int> g_level{int(Level::info)};

}  // namespace

void set_level(Level min) { g_level.store(int(min), std::memory_order_relaxed); }
Level level() { return Level(g_level.load(std::memory_order_relaxed)); }
bool enabled(Level l) { return int(l) >= g_level.load(std::memory_order_relaxed); }

void to_file(std::FILE* f) {
    Sink& s = sink();
    std::lock_guard lock(s.mu);
    s.file = f;
    s.callback = nullptr;
}

void to_callback(Callback cb) {
    Sink& s = sink();
    std::lock_guard lock(s.mu);
    s.callback = std::move(cb);
}

void reset() {
    to_file(nullptr);
    set_level(Level::info);
}

void write(Level l, std::string_view line) {
    if (!enabled(l)) return;
    Sink& s = sink();
    std::lock_guard lock(s.mu);
    if (s.callback) {
        s.callback(l, line);
        return;
    }
    std::FILE* f = s.file ? s.file : stderr;
    // One write per line, so lines from other writers of the stream do not cut into it.
    std::string text(line);
    text += '\n';
    std::fwrite(text.data(), 1, text.size(), f);
    std::fflush(f);
}

}  // namespace ds4::log
