// --simulate-used-memory (streaming/used_memory.h): the size's spelling, memory really taken
// while held (MemAvailable drops) and given back after, and the refusal of a size that would
// leave the machine without memory.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include "common/error.h"
#include "model/context_check.h"
#include "streaming/used_memory.h"

namespace {

using namespace ds4::streaming;

TEST(UsedMemory, SizesAreNOrNGB) {
    for (const char* ok : {"8", "0.5GB", "12G", "3GiB", "0"}) EXPECT_EQ(used_memory_error(ok), "") << ok;
    for (const char* bad : {"", "GB", "-1", "1TB", "eight", "1e3", "2MB", "nan"})
        EXPECT_NE(used_memory_error(bad), "") << bad;
    EXPECT_EQ(simulate_used_memory("", "test"), nullptr);
    EXPECT_EQ(simulate_used_memory("0", "test"), nullptr);
}

TEST(UsedMemory, HeldMemoryIsGoneFromTheAvailableUntilReleased) {
    const int64_t before = ds4::model::available_memory();
    if (before < (int64_t(3) << 30)) GTEST_SKIP() << "less than 3 GiB available";
    std::unique_ptr<UsedMemory> held;
    try {
        held = simulate_used_memory("1", "test");
    } catch (const ds4::Error& e) {
        GTEST_SKIP() << "cannot lock 1 GiB here: " << e.what();
    }
    ASSERT_NE(held, nullptr);
    EXPECT_EQ(held->bytes(), uint64_t(1) << 30);
    const int64_t during = ds4::model::available_memory();
    // Other processes move the figure a little; 1 GiB locked moves it by about 1 GiB.
    EXPECT_LT(during, before - (int64_t(600) << 20)) << before << " -> " << during;
    held.reset();
    EXPECT_GT(ds4::model::available_memory(), during + (int64_t(600) << 20));
}

TEST(UsedMemory, MoreThanTheMachineHasIsRefusedUpFront) {
    try {
        simulate_used_memory("1000000", "test");
        ADD_FAILURE() << "a petabyte was taken";
    } catch (const ds4::Error& e) {
        EXPECT_NE(std::string(e.what()).find("would leave less than 1 GiB"), std::string::npos) << e.what();
    }
}

}  // namespace
