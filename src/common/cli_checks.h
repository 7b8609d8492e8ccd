// CLI11 validators shared by the command-line tools. Their messages give the allowed range in
// plain numbers (CLI11's PositiveNumber printed DBL_MAX as 309 digits); CLI11 puts the flag in
// front: "--ctx: must be at least 1, got 0". The rules themselves live with what they guard
// (thread_count.h, sampling/sampler.h), so the server and the benchmarks apply the same ones.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>

namespace ds4::cli_checks {

// An integer >= min (help shows POSITIVE for 1, NONNEGATIVE for 0).
CLI::Validator at_least(int64_t min);
// An integer in [lo, hi].
CLI::Validator in_range(int64_t lo, int64_t hi);
// --threads: thread_count_error() of common/thread_count.h.
CLI::Validator thread_count();
// A number (integer or real) checked by `rule`, which returns nullptr when the value is
// allowed and otherwise the rule it breaks ("must be in [0, 1]"); `desc` is the help's tag.
CLI::Validator real(const char* (*rule)(double), const std::string& desc);
CLI::Validator integer(const char* (*rule)(int64_t), const std::string& desc);

}  // namespace ds4::cli_checks
