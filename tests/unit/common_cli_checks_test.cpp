// The flag rules the command-line tools share (issue 22 items 4, 16, 17): --threads is capped
// at a few per hardware thread, range errors name the flag and the range in plain numbers, and
// the sampling flags follow the server's rules (one rule in sampling/sampler.h).
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <string>
#include <vector>

#include "common/cli_checks.h"
#include "common/error.h"
#include "common/thread_count.h"
#include "sampling/sampler.h"

namespace ds4 {
namespace {

// Parses `args` against one option "--x" checked by `v`: "" when accepted, else CLI11's message.
template <class T>
std::string parse_error(const CLI::Validator& v, const std::string& arg, T* out = nullptr) {
    CLI::App app;
    T value{};
    app.add_option("--x", value)->check(v);
    std::vector<std::string> args = {arg, "--x"};  // CLI11 parses a reversed vector
    try {
        app.parse(args);
    } catch (const CLI::ParseError& e) {
        return e.what();
    }
    if (out) *out = value;
    return "";
}

TEST(ThreadCount, ZeroIsAllHardwareThreadsAndTheCapIsFourPerThread) {
    EXPECT_GE(hardware_threads(), 1);
    EXPECT_EQ(max_threads(), 4 * hardware_threads());
    EXPECT_EQ(resolve_threads(0), hardware_threads());
    EXPECT_EQ(resolve_threads(1), 1);
    EXPECT_EQ(resolve_threads(max_threads()), max_threads());
    EXPECT_EQ(thread_count_error(max_threads()), "");
    for (const int64_t bad : {int64_t(-1), int64_t(max_threads()) + 1, int64_t(20000), int64_t(1) << 40}) {
        SCOPED_TRACE(bad);
        const std::string e = thread_count_error(bad);
        EXPECT_NE(e.find("1 to " + std::to_string(max_threads())), std::string::npos) << e;
        EXPECT_NE(e.find("got " + std::to_string(bad)), std::string::npos) << e;
        try {
            resolve_threads(bad, "--threads");
            ADD_FAILURE() << "no error";
        } catch (const Error& err) {
            EXPECT_EQ(std::string(err.what()).rfind("--threads: must be 0 (all ", 0), 0u) << err.what();
        }
    }
}

TEST(CliChecks, ThreadFlagRejectsTooManyThreads) {
    int t = -1;
    EXPECT_EQ(parse_error(cli_checks::thread_count(), "0", &t), "");
    EXPECT_EQ(t, 0);
    EXPECT_EQ(parse_error<int>(cli_checks::thread_count(), std::to_string(max_threads())), "");
    const std::string e = parse_error<int>(cli_checks::thread_count(), "20000");
    EXPECT_EQ(e.rfind("--x: must be 0 (all ", 0), 0u) << e;
    EXPECT_NE(e.find("got 20000"), std::string::npos) << e;
    EXPECT_NE(parse_error<int>(cli_checks::thread_count(), "-3"), "");
    EXPECT_NE(parse_error<int>(cli_checks::thread_count(), "99999999999999999999999"), "");
}

TEST(CliChecks, RangeErrorsUsePlainNumbers) {
    const std::string e = parse_error<long long>(cli_checks::at_least(1), "0");
    EXPECT_EQ(e, "--x: must be at least 1, got 0");
    EXPECT_EQ(parse_error<long long>(cli_checks::at_least(0), "-5"), "--x: must be at least 0, got -5");
    EXPECT_EQ(parse_error<int>(cli_checks::in_range(0, 65535), "70000"),
              "--x: must be 0 to 65535, got 70000");
    EXPECT_EQ(parse_error<long long>(cli_checks::at_least(1), "abc"), "--x: expected an integer, got 'abc'");
    long long v = 0;
    EXPECT_EQ(parse_error(cli_checks::at_least(1), "4096", &v), "");
    EXPECT_EQ(v, 4096);
    // Read as CLI11 reads integers (base prefixes included), so the check sees the stored value.
    EXPECT_EQ(parse_error(cli_checks::in_range(0, 20), "0x10", &v), "");
    EXPECT_EQ(v, 16);
    // No message carries a huge number (CLI11's PositiveNumber printed DBL_MAX in 309 digits).
    for (const std::string arg : {"0", "-1", "1e999", "99999999999999999999999"}) {
        const std::string m = parse_error<long long>(cli_checks::at_least(1), arg);
        EXPECT_LT(m.size(), 80u) << m;
    }
}

TEST(SamplingRules, SharedByServerAndCli) {
    EXPECT_EQ(sampling::temperature_error(0), nullptr);
    EXPECT_EQ(sampling::temperature_error(1.5), nullptr);
    EXPECT_NE(sampling::temperature_error(-1), nullptr);
    EXPECT_NE(sampling::temperature_error(NAN), nullptr);
    EXPECT_NE(sampling::temperature_error(INFINITY), nullptr);
    EXPECT_EQ(sampling::top_p_error(1), nullptr);
    EXPECT_NE(sampling::top_p_error(2), nullptr);
    EXPECT_NE(sampling::top_p_error(NAN), nullptr);
    EXPECT_EQ(sampling::min_p_error(0), nullptr);
    EXPECT_NE(sampling::min_p_error(-1), nullptr);
    EXPECT_EQ(sampling::top_k_error(0), nullptr);
    EXPECT_NE(sampling::top_k_error(-5), nullptr);

    auto temp = cli_checks::real(sampling::temperature_error, ">= 0");
    float f = -1;
    EXPECT_EQ(parse_error(temp, "0.7", &f), "");
    EXPECT_FLOAT_EQ(f, 0.7f);
    EXPECT_EQ(parse_error<float>(temp, "-1"), "--x: must be a finite number >= 0, got -1");
    EXPECT_EQ(parse_error<float>(temp, "nan"), "--x: must be a finite number >= 0, got nan");
    EXPECT_EQ(parse_error<float>(cli_checks::real(sampling::top_p_error, ""), "2"),
              "--x: must be in [0, 1], got 2");
    EXPECT_EQ(parse_error<int>(cli_checks::integer(sampling::top_k_error, ""), "-5"),
              "--x: must be >= 0, got -5");
}

}  // namespace
}  // namespace ds4
