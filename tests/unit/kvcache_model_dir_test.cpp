// Per-model subfolders of a shared cache root (src/kvcache/model_dir.h): the name, and the move
// of a flat (older) layout's files into their model's subfolder; temporaries of writers gone.
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <ctime>

#include <fstream>

#include "kvcache/model_dir.h"
#include "kvcache_test_util.h"

namespace {

using namespace kvtest;

// A checkpoint of model `id` written directly into `root` (the flat layout), as a DiskCache
// writes one; returns its name.
std::string flat_checkpoint(const std::string& root, ModelId id, const std::string& text) {
    write_file(root + "/" + file_name(text), text, payload(300, 5), {SaveReason::cold, 4, 512}, {}, id, 7);
    return file_name(text);
}

TEST(KvCacheModelDir, IsTheRootPlusTheModelsHexIdentity) {
    EXPECT_EQ(model_dir("/var/cache/kv", model_a()), "/var/cache/kv/0102030405060708090a0b0c0d0e0f10");
    EXPECT_EQ(model_dir("/var/cache/kv/", model_a()), model_dir("/var/cache/kv", model_a()));
    EXPECT_NE(model_dir("/r", model_a()), model_dir("/r", model_b()));
}

TEST(KvCacheModelDir, OnlyTheModelsOwnFlatFilesMoveAndTheyLoadAfterwards) {
    TempDir d;
    const std::string a1 = flat_checkpoint(d.path, model_a(), "model a, first conversation");
    const std::string a2 = flat_checkpoint(d.path, model_a(), "model a, second conversation");
    const std::string b1 = flat_checkpoint(d.path, model_b(), "model b's conversation");
    const std::string junk = std::string(32, 'c') + ".kv";
    std::ofstream(d.path + "/" + junk) << "not a checkpoint";
    // A symlink to one of model a's files is neither followed nor moved.
    const std::string link = std::string(32, 'd') + ".kv";
    ASSERT_EQ(::symlink((d.path + "/" + a1).c_str(), (d.path + "/" + link).c_str()), 0);

    const Adopted got = adopt_root_files(d.path, {model_a(), 7}, model_dir(d.path, model_a()));
    EXPECT_EQ(got.moved, 2);
    EXPECT_EQ(got.left, 3);
    const std::string sub = model_dir(d.path, model_a());
    for (const auto& n : {a1, a2}) {
        EXPECT_FALSE(fs::exists(d.path + "/" + n)) << n;
        EXPECT_TRUE(fs::is_regular_file(sub + "/" + n)) << n;
    }
    for (const auto& n : {b1, junk}) EXPECT_TRUE(fs::exists(d.path + "/" + n)) << n;
    EXPECT_TRUE(fs::is_symlink(d.path + "/" + link));
    EXPECT_FALSE(fs::exists(model_dir(d.path, model_b())));  // b's files wait for model b

    DiskCache c(options(sub, uint64_t(1) << 30));
    ASSERT_TRUE(c.lookup("model a, first conversation and more", 4096, 1).has_value());
    EXPECT_EQ(c.stats().files, 2u);
    // Model b adopts its own later; a payload version that differs adopts nothing.
    EXPECT_EQ(adopt_root_files(d.path, {model_b(), 8}, model_dir(d.path, model_b())).moved, 0);
    EXPECT_EQ(adopt_root_files(d.path, {model_b(), 7}, model_dir(d.path, model_b())).moved, 1);
}

TEST(KvCacheModelDir, ANewerFileInTheSubfolderIsNeverReplaced) {
    TempDir d;
    const std::string sub = model_dir(d.path, model_a());
    fs::create_directories(sub);
    const std::string text = "the same conversation";
    write_file(sub + "/" + file_name(text), text, payload(900, 9), {SaveReason::continued, 9, 512}, {}, model_a(), 7);
    const auto before = fs::file_size(sub + "/" + file_name(text));
    flat_checkpoint(d.path, model_a(), text);
    EXPECT_EQ(adopt_root_files(d.path, {model_a(), 7}, model_dir(d.path, model_a())).moved, 0);
    EXPECT_EQ(fs::file_size(sub + "/" + file_name(text)), before);
    EXPECT_FALSE(fs::exists(d.path + "/" + file_name(text)));  // the stale flat copy is dropped
}

TEST(KvCacheModelDir, AMissingRootAdoptsNothing) {
    EXPECT_EQ(adopt_root_files("/nonexistent/ds4/kv/root", {model_a(), 7}, "/nonexistent/ds4/kv/root/x").moved, 0);
}

}  // namespace

namespace {

using namespace kvtest;

std::string touch(const std::string& path, int64_t age_s = 0) {
    std::ofstream(path) << "partial";
    if (age_s > 0) {
        const struct timeval tv[2] = {{time(nullptr) - age_s, 0}, {time(nullptr) - age_s, 0}};
        ::utimes(path.c_str(), tv);
    }
    return path;
}

std::string local_host() {
    char buf[256] = {};
    ::gethostname(buf, sizeof buf - 1);
    std::string t;
    for (const char* c = buf; *c && t.size() < 32; ++c)
        if (std::isalnum(static_cast<unsigned char>(*c)) || *c == '-') t += *c;
    return t.empty() ? "host" : t;
}

// A directory shared over a network file system holds temporaries being written on other
// hosts, whose pids mean nothing here: only an hour without change marks them abandoned.
TEST(KvCacheTemporaries, OnlyThoseWhoseWriterIsGoneAreRemoved) {
    TempDir d;
    const pid_t child = fork();
    if (child == 0) _exit(0);
    ASSERT_GT(child, 0);
    ::waitpid(child, nullptr, 0);  // now a pid nobody has
    const std::string name = std::string(32, 'e') + ".kv.tmp.";
    const std::string dead_here = touch(d.path + "/" + name + std::to_string(child) + ".0." + local_host());
    const std::string dead_legacy = touch(d.path + "/" + name + std::to_string(child) + ".1");
    const std::string alive_here = touch(d.path + "/" + name + std::to_string(getppid()) + ".2." + local_host());
    const std::string fresh_remote = touch(d.path + "/" + name + std::to_string(child) + ".3.otherhost", 60);
    const std::string old_remote = touch(d.path + "/" + name + std::to_string(getppid()) + ".4.otherhost", 7200);
    DiskCache c(options(d.path, uint64_t(1) << 30));
    EXPECT_FALSE(fs::exists(dead_here));
    EXPECT_FALSE(fs::exists(dead_legacy));
    EXPECT_TRUE(fs::exists(alive_here));
    EXPECT_TRUE(fs::exists(fresh_remote));  // the same pid as dead_here, but another host's
    EXPECT_FALSE(fs::exists(old_remote));
    // Stores go on beside the others' temporaries and leave none of their own.
    ASSERT_TRUE(c.store("text", payload(100, 1), {SaveReason::cold, 1, 64}, {}));
    for (const auto& e : fs::directory_iterator(d.path))
        EXPECT_NE(e.path().filename().string().rfind(file_name("text") + ".tmp.", 0), 0u) << e.path();
}

}  // namespace
