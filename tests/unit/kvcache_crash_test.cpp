// The disk KV cache under a crash (SIGKILL at random moments of a store loop) and a full disk
// (ENOSPC on a small tmpfs in a user namespace; EFBIG from RLIMIT_FSIZE).
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <thread>

#include "kvcache_test_util.h"

namespace {

using namespace kvtest;

// A child process's check: exits with the line number when it fails.
#define CHILD_CHECK(x)                  \
    do {                                \
        if (!(x)) ::_exit(__LINE__ % 200 + 1); \
    } while (0)

TEST(KvCacheCrash, KillDuringStoresLeavesOnlyValidFiles) {
    TempDir d;
    const uint64_t budget = 6u << 20;
    std::mt19937 rng(7);
    int rounds_with_files = 0;
    for (int round = 0; round < 30; ++round) {
        const pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            DiskCache c(options(d.path, budget));
            for (uint32_t i = 0;; ++i) {
                const std::string text = "conversation " + std::to_string(i % 9) + std::string(i % 5 * 50, 'x');
                const size_t n = size_t((i * 2654435761u) % (2u << 20));
                c.store(text, payload(n, uint32_t(n)), {SaveReason::continued, int64_t(n % 1000), 100},
                        {{"call_" + std::to_string(i % 9), "dsml"}});
            }
        }
        std::this_thread::sleep_for(std::chrono::microseconds(2000 + rng() % 40000));
        ::kill(pid, SIGKILL);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status));
        // Whatever the moment, the directory (temporaries included) is within the budget.
        ASSERT_LE(dir_bytes(d.path), budget) << round;
        // A new cache finds nothing to remove but the temporary, and every file loads.
        testing::internal::CaptureStderr();
        DiskCache c(options(d.path, budget));
        EXPECT_EQ(testing::internal::GetCapturedStderr(), "") << round;
        EXPECT_FALSE(has_temp(d.path)) << round;
        const auto all = c.entries();
        if (!all.empty()) ++rounds_with_files;
        for (const Hit& h : all) {
            const auto e = c.load(h);
            ASSERT_TRUE(e) << round << " " << h.file;
            EXPECT_EQ(e->payload, payload(e->payload.size(), uint32_t(e->payload.size())));
            EXPECT_EQ(e->tools.size(), 1u);
        }
        EXPECT_EQ(dir_bytes(d.path), c.stats().total_bytes);
    }
    EXPECT_GT(rounds_with_files, 10);
}

// Runs `body` in a child with a full-disk condition set up by `setup` (which returns false when
// it cannot be set up: exit 77, the test skips).
template <class Setup, class Body>
int in_child(Setup setup, Body body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (!setup()) ::_exit(77);
        body();
        ::_exit(0);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 1000 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// In the child: stores until the disk is full; saving gets disabled, no temporary remains, the
// earlier file still loads.
void fill_the_disk(const std::string& dir) {
    testing::internal::CaptureStderr();
    DiskCache c(options(dir, 1u << 30));
    CHILD_CHECK(c.store("small", payload(1000, 1), {SaveReason::cold, 3, 100}, {}));
    CHILD_CHECK(c.saving_enabled());
    CHILD_CHECK(!c.store("large", payload(600000, 2), {SaveReason::cold, 3, 100}, {}));
    CHILD_CHECK(!c.saving_enabled());
    const std::string err = testing::internal::GetCapturedStderr();
    CHILD_CHECK(err.find("saving disabled") != std::string::npos);
    CHILD_CHECK(std::count(err.begin(), err.end(), '\n') == 1);
    CHILD_CHECK(!has_temp(dir));
    CHILD_CHECK(!fs::exists(dir + "/" + file_name("large")));
    CHILD_CHECK(c.stats().store_failures == 1);
    CHILD_CHECK(!c.store("tiny", payload(10, 3), {SaveReason::cold, 3, 100}, {}));  // disabled
    CHILD_CHECK(!fs::exists(dir + "/" + file_name("tiny")));
    const auto h = c.lookup("small and more", 100, 0);
    CHILD_CHECK(h && c.load(*h));
    CHILD_CHECK(c.stats().files == 1);
}

bool write_text(const char* path, const std::string& s) {
    const int fd = ::open(path, O_WRONLY);
    if (fd < 0) return false;
    const bool ok = ::write(fd, s.data(), s.size()) == ssize_t(s.size());
    ::close(fd);
    return ok;
}

TEST(KvCacheFull, EnospcOnSmallTmpfsDisablesSaving) {
    TempDir d;
    const uid_t uid = getuid();
    const gid_t gid = getgid();
    const int rc = in_child(
        [&] {
            if (::unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0) return false;
            if (!write_text("/proc/self/setgroups", "deny")) return false;
            if (!write_text("/proc/self/uid_map", "0 " + std::to_string(uid) + " 1")) return false;
            if (!write_text("/proc/self/gid_map", "0 " + std::to_string(gid) + " 1")) return false;
            ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr);
            return ::mount("tmpfs", d.path.c_str(), "tmpfs", 0, "size=256k") == 0;
        },
        [&] { fill_the_disk(d.path); });
    if (rc == 77) GTEST_SKIP() << "no user namespace with a tmpfs mount here";
    EXPECT_EQ(rc, 0) << "child check failed (line % 200 + 1), or signal 1000+";
}

TEST(KvCacheFull, EfbigFromFileSizeLimitDisablesSaving) {
    TempDir d;
    const int rc = in_child(
        [&] {
            ::signal(SIGXFSZ, SIG_IGN);
            const rlimit lim{300000, 300000};
            return ::setrlimit(RLIMIT_FSIZE, &lim) == 0;
        },
        [&] { fill_the_disk(d.path); });
    if (rc == 77) GTEST_SKIP() << "cannot set RLIMIT_FSIZE";
    EXPECT_EQ(rc, 0) << "child check failed (line % 200 + 1), or signal 1000+";
}

}  // namespace
