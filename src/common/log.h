// The diagnostic lines of the libraries (the SSD streaming cache's counters, the pipeline's
// route, the disk KV cache's warnings, the server's request lines) go through one sink, so an
// embedding program decides where they land and how many it wants; the tools keep the default,
// stderr. A line is written as formatted, with a newline and no prefix (tests grep stderr for
// the exact text).
//
//   log::info("ds4: worker {}:{} registered", host, port);
//   log::set_level(log::Level::warn);                      // drop debug and info lines
//   log::to_callback([](log::Level l, std::string_view line) { ... });
//
// Process-wide and thread-safe: lines are written whole, one at a time.
#pragma once

#include <fmt/format.h>

#include <cstdio>
#include <functional>
#include <string_view>
#include <utility>

namespace ds4::log {

enum class Level { debug, info, warn, error };

// Receives each line without its newline. Called with the sink's lock held (one line at a
// time, never concurrently); it must not log itself.
using Callback = std::function<void(Level, std::string_view line)>;

// Lines below `min` are dropped (default: Level::info).
void set_level(Level min);
Level level();
bool enabled(Level l);
// Where lines go: a stream (default stderr; flushed after each line) or a callback.
void to_file(std::FILE* f);
void to_callback(Callback cb);
// Back to the defaults: stderr, Level::info.
void reset();

// Writes one line (a newline is added) when `l` is enabled.
void write(Level l, std::string_view line);

template <class... Args>
void print(Level l, fmt::format_string<Args...> f, Args&&... args) {
    if (enabled(l)) write(l, fmt::format(f, std::forward<Args>(args)...));
}
template <class... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
    print(Level::debug, f, std::forward<Args>(args)...);
}
template <class... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
    print(Level::info, f, std::forward<Args>(args)...);
}
template <class... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
    print(Level::warn, f, std::forward<Args>(args)...);
}
template <class... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
    print(Level::error, f, std::forward<Args>(args)...);
}

}  // namespace ds4::log
