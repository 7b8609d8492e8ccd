// Whole-file reads and atomic replacement (common/file_io.h; issue 22 items 11, 15, 18): a
// directory is no prompt, a failed write leaves the old file whole and no temporary behind,
// and devices are written in place instead of being replaced.
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/file_io.h"
#include "support/gguf_test_util.h"

namespace ds4 {
namespace {

std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(dir)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
}

std::string error_of(auto fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

std::string slurp(const std::string& path) { return read_file(path); }

TEST(ReadFile, ReadsBytesAndRefusesDirectories) {
    test::ScratchDir dir;
    const std::string p = dir.file("a.txt");
    write_file(p, std::string("hello\0world", 11));
    EXPECT_EQ(read_file(p), std::string("hello\0world", 11));
    const std::string d = dir.file("");
    EXPECT_EQ(error_of([&] { read_file(d); }), d + ": is a directory, not a file");
    EXPECT_EQ(error_of([&] { read_file(dir.file("missing")); }).rfind(dir.file("missing") + ": cannot open", 0), 0u);
    EXPECT_EQ(read_file("/dev/null"), "");
}

TEST(WriteFile, ReplacesAndKeepsPermissions) {
    test::ScratchDir dir;
    const std::string p = dir.file("f.bin");
    write_file(p, "first version, longer");
    ASSERT_EQ(chmod(p.c_str(), 0640), 0);
    write_file(p, "second");
    EXPECT_EQ(slurp(p), "second");
    struct stat st {};
    ASSERT_EQ(stat(p.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0640u);
    EXPECT_EQ(entries(dir.file("")), std::vector<std::string>{"f.bin"});
}

TEST(WriteFile, DevicesAreWrittenInPlace) {
    EXPECT_NO_THROW(write_file("/dev/null", "discarded"));
    // A full disk is reported, naming the file.
    EXPECT_EQ(error_of([] { write_file("/dev/full", std::string(100000, 'x')); }),
              "/dev/full: write failed: No space left on device");
    test::ScratchDir dir;
    EXPECT_EQ(error_of([&] { write_file(dir.file(""), "x"); }), dir.file("") + ": is a directory");
}

TEST(AtomicFile, RefusesToReplaceNonRegularFiles) {
    EXPECT_EQ(error_of([] { AtomicFile f("/dev/null"); }), "/dev/null: exists and is not a regular file");
}

TEST(AtomicFile, SymlinkTargetIsReplacedNotFollowed) {
    test::ScratchDir dir;
    const std::string victim = dir.file("victim"), link = dir.file("link");
    write_file(victim, "keep");
    std::filesystem::create_symlink(victim, link);
    write_file(link, "new");
    EXPECT_EQ(slurp(victim), "keep");
    EXPECT_FALSE(std::filesystem::is_symlink(link));
    EXPECT_EQ(slurp(link), "new");
}

// A write that fails part way (here: a file size limit, as a full disk would) leaves the old
// file whole and no temporary behind, and says so. Run in a child: the limit is per process.
TEST(AtomicFile, FailedWriteLeavesTheOldFile) {
    test::ScratchDir dir;
    const std::string p = dir.file("history");
    const std::string old(3000, 'o');
    write_file(p, old);
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead of killing us
        const rlimit lim{4096, 4096};
        setrlimit(RLIMIT_FSIZE, &lim);
        const std::string msg = error_of([&] { write_file(p, std::string(100000, 'n')); });
        _exit(msg == p + ": write failed: File too large" ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0) << "the failure was not reported as expected";
    EXPECT_EQ(slurp(p), old);
    EXPECT_EQ(entries(dir.file("")), std::vector<std::string>{"history"});
}

}  // namespace
}  // namespace ds4
