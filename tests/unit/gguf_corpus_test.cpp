// The fuzz seed corpus (fuzz/corpus/gguf, written by fuzz/make_gguf_corpus.py, a separate
// Python implementation of the format): every valid_* file parses with the expected content,
// every broken_* file and every past fuzzer finding (crash-*) is rejected with an Error.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/error.h"
#include "gguf/reader.h"

namespace ds4::gguf {
namespace {

namespace fs = std::filesystem;

fs::path corpus_dir() { return fs::path(DS4_SOURCE_DIR) / "fuzz" / "corpus" / "gguf"; }

std::string file(const char* name) { return (corpus_dir() / name).string(); }

TEST(GgufCorpus, ValidSeedsParse) {
    size_t valid = 0;
    for (const auto& e : fs::directory_iterator(corpus_dir())) {
        const std::string name = e.path().filename().string();
        if (name.rfind("valid_", 0) != 0) continue;
        EXPECT_NO_THROW(File::open(e.path().string())) << name;
        ++valid;
    }
    EXPECT_GE(valid, 5u);
}

TEST(GgufCorpus, BrokenSeedsAndFindingsAreRejected) {
    size_t broken = 0;
    for (const auto& e : fs::directory_iterator(corpus_dir())) {
        const std::string name = e.path().filename().string();
        if (name.rfind("broken_", 0) != 0 && name.rfind("crash-", 0) != 0) continue;
        EXPECT_THROW(File::open(e.path().string()), Error) << name;
        ++broken;
    }
    EXPECT_GE(broken, 5u);
}

TEST(GgufCorpus, ContentOfIndependentlyWrittenFiles) {
    auto every = File::open(file("valid_every_value.gguf"));
    EXPECT_EQ(every->metadata().size(), 17u);
    EXPECT_EQ(every->get_u32("u8"), 255u);
    EXPECT_EQ(every->find("i64")->as_int(), INT64_MIN);
    EXPECT_EQ(every->get_u64("u64"), UINT64_MAX);
    EXPECT_EQ(every->get_string("str"), "deepseek4");
    EXPECT_TRUE(every->get_bool("bool"));
    EXPECT_EQ(every->find("a.str")->to_string(), "[\"a\", \"\", \"bc\"]");
    EXPECT_EQ(every->find("a.u8")->elems.size(), 0u);

    auto types = File::open(file("valid_tensor_types.gguf"));
    ASSERT_EQ(types->tensors().size(), 7u);
    EXPECT_EQ(types->tensor("q2k").type, TensorType::Q2_K);
    EXPECT_EQ(types->tensor("q2k").n_bytes, 84u);
    EXPECT_EQ(types->tensor("mx").shape_string(), "[32, 1, 1, 2]");
    EXPECT_EQ(types->tensor("mx").n_bytes, 34u);
    // Python fills tensor bytes with (i * 7 + type id) & 0xff.
    const TensorInfo& iq2 = types->tensor("iq2");
    EXPECT_EQ(types->data(iq2)[5], uint8_t(5 * 7 + 16));

    auto a64 = File::open(file("valid_align64.gguf"));
    EXPECT_EQ(a64->alignment(), 64u);
    EXPECT_EQ(a64->tensor("b").offset, 64u);
    EXPECT_EQ(File::open(file("valid_align1.gguf"))->tensor("b").offset, 6u);
    EXPECT_EQ(File::open(file("valid_v2.gguf"))->version(), 2u);
    EXPECT_EQ(File::open(file("valid_empty.gguf"))->tensors().size(), 0u);
}

}  // namespace
}  // namespace ds4::gguf
