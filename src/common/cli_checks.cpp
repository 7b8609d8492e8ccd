#include "common/cli_checks.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstdlib>
#include <optional>

#include "common/thread_count.h"

namespace ds4::cli_checks {
namespace {

// Integers are read as CLI11 reads them (strtoll, base 0), so the check sees the value the
// option will hold; nullopt for text that is no integer or does not fit int64.
std::optional<int64_t> parse_int(const std::string& s, bool* overflow) {
    *overflow = false;
    if (s.empty()) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 0);
    if (end != s.c_str() + s.size()) return std::nullopt;
    if (errno == ERANGE) {
        *overflow = true;
        return std::nullopt;
    }
    return int64_t(v);
}

// The validator body for an integer check; `why(v)` is empty when v is allowed.
template <class Why>
CLI::Validator int_validator(Why why, std::string desc) {
    return CLI::Validator(
        [why](std::string& s) -> std::string {
            bool overflow = false;
            const auto v = parse_int(s, &overflow);
            if (overflow) return fmt::format("{} is too large", s);
            if (!v) return fmt::format("expected an integer, got '{}'", s);
            return why(*v);
        },
        std::move(desc));
}

}  // namespace

CLI::Validator at_least(int64_t min) {
    const std::string desc = min == 1 ? "POSITIVE" : min == 0 ? "NONNEGATIVE" : fmt::format(">= {}", min);
    return int_validator(
        [min](int64_t v) {
            return v >= min ? std::string() : fmt::format("must be at least {}, got {}", min, v);
        },
        desc);
}

CLI::Validator in_range(int64_t lo, int64_t hi) {
    return int_validator(
        [lo, hi](int64_t v) {
            return v >= lo && v <= hi ? std::string()
                                      : fmt::format("must be {} to {}, got {}", lo, hi, v);
        },
        fmt::format("INT in [{} - {}]", lo, hi));
}

CLI::Validator thread_count() {
    return int_validator([](int64_t v) { return thread_count_error(v); },
                         fmt::format("0..{}", max_threads()));
}

CLI::Validator real(const char* (*rule)(double), const std::string& desc) {
    return CLI::Validator(
        [rule](std::string& s) -> std::string {
            char* end = nullptr;
            const double v = s.empty() ? 0.0 : std::strtod(s.c_str(), &end);
            if (s.empty() || end != s.c_str() + s.size())
                return fmt::format("expected a number, got '{}'", s);
            const char* why = rule(v);
            return why ? fmt::format("{}, got {}", why, s) : std::string();
        },
        desc);
}

CLI::Validator integer(const char* (*rule)(int64_t), const std::string& desc) {
    return int_validator(
        [rule](int64_t v) {
            const char* why = rule(v);
            return why ? fmt::format("{}, got {}", why, v) : std::string();
        },
        desc);
}

}  // namespace ds4::cli_checks
