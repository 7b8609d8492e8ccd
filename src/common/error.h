// The one error type at library boundaries. Binaries catch it and print what() as a single
// line; the message carries its own context (file, byte offset, key or tensor name, expected
// vs found) so nobody has to guess where a bad input went wrong.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace ds4 {

class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// Builds and throws an Error from a fmt format string.
template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
    throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ds4
