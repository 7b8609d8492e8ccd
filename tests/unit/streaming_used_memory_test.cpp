// --simulate-used-memory (streaming/used_memory.h): the size's spelling, memory really locked
// while held (this process's VmLck) and given back after, and the refusal of a size that would
// leave the machine without memory.
#include <gtest/gtest.h>

#include <sys/resource.h>

#include <fstream>
#include <string>

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

// This process's locked memory (/proc/self/status VmLck), in bytes: the machine-wide
// MemAvailable moves with every other test running beside this one, this does not.
int64_t locked_bytes() {
    std::ifstream in("/proc/self/status");
    std::string key;
    int64_t kib = 0;
    while (in >> key) {
        if (key == "VmLck:" && in >> kib) return kib * 1024;
        in.ignore(1 << 20, '\n');
    }
    return -1;
}

TEST(UsedMemory, HeldMemoryIsLockedUntilReleased) {
    if (ds4::model::available_memory() < (int64_t(3) << 30)) GTEST_SKIP() << "less than 3 GiB available";
    const int64_t before = locked_bytes();
    if (before < 0) GTEST_SKIP() << "no VmLck in /proc/self/status";
    std::unique_ptr<UsedMemory> held;
    try {
        held = simulate_used_memory("1", "test");
    } catch (const ds4::Error& e) {
        GTEST_SKIP() << "cannot lock 1 GiB here: " << e.what();
    }
    ASSERT_NE(held, nullptr);
    EXPECT_EQ(held->bytes(), uint64_t(1) << 30);
    EXPECT_EQ(locked_bytes(), before + (int64_t(1) << 30));
    held.reset();
    EXPECT_EQ(locked_bytes(), before);
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
