// The log sink (common/log.h): level filtering, redirection to a callback or a stream, lines
// written whole from several threads, and the defaults coming back with reset().
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/log.h"

namespace ds4 {
namespace {

struct Captured {
    std::vector<std::pair<log::Level, std::string>> lines;
    void attach() {
        log::to_callback([this](log::Level l, std::string_view line) { lines.emplace_back(l, std::string(line)); });
    }
};

class Log : public ::testing::Test {
protected:
    void TearDown() override { log::reset(); }
};

TEST_F(Log, FormatsAndSendsLinesToTheCallback) {
    Captured c;
    c.attach();
    log::info("worker {}:{} registered", "10.0.0.2", 4001);
    log::error("kv cache: {}", "disk full");
    ASSERT_EQ(c.lines.size(), 2u);
    EXPECT_EQ(c.lines[0].first, log::Level::info);
    EXPECT_EQ(c.lines[0].second, "worker 10.0.0.2:4001 registered");
    EXPECT_EQ(c.lines[1].first, log::Level::error);
    EXPECT_EQ(c.lines[1].second, "kv cache: disk full");
}

TEST_F(Log, DropsLinesBelowTheMinimumLevel) {
    Captured c;
    c.attach();
    EXPECT_EQ(log::level(), log::Level::info);
    log::debug("not shown by default");
    log::set_level(log::Level::warn);
    EXPECT_FALSE(log::enabled(log::Level::info));
    EXPECT_TRUE(log::enabled(log::Level::error));
    log::info("dropped");
    log::warn("kept {}", 1);
    log::write(log::Level::debug, "dropped too");
    log::set_level(log::Level::debug);
    log::debug("now shown");
    ASSERT_EQ(c.lines.size(), 2u);
    EXPECT_EQ(c.lines[0].second, "kept 1");
    EXPECT_EQ(c.lines[1].first, log::Level::debug);
    EXPECT_EQ(c.lines[1].second, "now shown");
}

TEST_F(Log, WritesWholeLinesToAStream) {
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    log::to_file(f);
    log::warn("first {}", 1);
    log::info("second");
    std::rewind(f);
    char buf[64] = {};
    const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    EXPECT_EQ(std::string(buf, n), "first 1\nsecond\n");
    log::reset();  // off the stream before it closes
    std::fclose(f);
}

TEST_F(Log, AStreamReplacesTheCallbackAndResetRestoresTheDefaults) {
    Captured c;
    c.attach();
    std::FILE* f = std::tmpfile();
    ASSERT_NE(f, nullptr);
    log::to_file(f);
    log::set_level(log::Level::error);
    log::error("to the stream");
    EXPECT_TRUE(c.lines.empty());
    log::reset();
    EXPECT_EQ(log::level(), log::Level::info);
    std::fclose(f);
}

TEST_F(Log, LinesFromSeveralThreadsArriveWhole) {
    Captured c;
    c.attach();
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([t] {
            for (int i = 0; i < 200; ++i) log::info("thread {} line {}", t, i);
        });
    for (auto& th : threads) th.join();
    ASSERT_EQ(c.lines.size(), 800u);
    std::vector<int> next(4, 0);
    for (const auto& [level, line] : c.lines) {
        int t = -1, i = -1;
        ASSERT_EQ(std::sscanf(line.c_str(), "thread %d line %d", &t, &i), 2) << line;
        ASSERT_GE(t, 0);
        ASSERT_LT(t, 4);
        EXPECT_EQ(i, next[size_t(t)]++) << "a thread's lines arrive in its order";
    }
}

}  // namespace
}  // namespace ds4
