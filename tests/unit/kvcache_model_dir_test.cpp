// Per-model subfolders of a shared cache root (src/kvcache/model_dir.h): the name, and the move
// of a flat (older) layout's files into their model's subfolder.
#include <unistd.h>

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
