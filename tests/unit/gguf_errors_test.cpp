// Hand-made broken GGUF files: a valid image from the Writer, patched field by field. Each
// must give a ds4::Error with the file name, the byte offset of the bad field and the
// specific problem -- and never crash (this test runs under ASan+UBSan, label "sanitize").
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "support/gguf_test_util.h"

namespace ds4::gguf {
namespace {

using test::ScratchDir;

class GgufErrors : public ::testing::Test {
protected:
    // Base image (alignment 64, so general.alignment is present):
    //   k1: u32 7, k2: string "hello", k3: [i32] {1,2,3}, k4: bool true, general.alignment
    //   t1: q8_0 [64] (68 bytes at 0), t2: f32 [16] (64 bytes at 128, ending the file exactly)
    void SetUp() override {
        const std::string path = dir_.file("base.gguf");
        Writer w(path, 64);
        w.set("k1", Value::u32(7));
        w.set("k2", Value::str("hello"));
        w.set("k3", Value::array_i32({1, 2, 3}));
        w.set("k4", Value::boolean(true));
        w.add_tensor("t1", TensorType::Q8_0, {64});
        w.add_tensor("t2", TensorType::F32, {16});
        w.begin_data();
        w.write_tensor("t1", test::pattern(68, 1));
        w.write_tensor("t2", test::pattern(64, 2));
        w.finish();
        img_ = test::read_all(path);
        ASSERT_NO_THROW(File::parse(img_, "base"));
        ASSERT_EQ(img_.size(), File::parse(img_, "base")->data_offset() + 192);
    }

    // Offset of the first field after a length-prefixed string (a key or a tensor name).
    size_t after(const std::string& s) const {
        std::vector<uint8_t> needle(8 + s.size());
        const uint64_t n = s.size();
        std::memcpy(needle.data(), &n, 8);
        std::memcpy(needle.data() + 8, s.data(), s.size());
        auto it = std::search(img_.begin(), img_.end(), needle.begin(), needle.end());
        EXPECT_NE(it, img_.end()) << s;
        return size_t(it - img_.begin()) + needle.size();
    }
    size_t start_of(const std::string& s) const { return after(s) - 8 - s.size(); }
    // Tensor info field offsets (one dimension each in the base image).
    size_t n_dims_at(const std::string& t) const { return after(t); }
    size_t ne0_at(const std::string& t) const { return after(t) + 4; }
    size_t type_at(const std::string& t) const { return after(t) + 12; }
    size_t offset_at(const std::string& t) const { return after(t) + 16; }

    template <class T>
    void put(size_t at, T v) {
        ASSERT_LE(at + sizeof(T), img_.size());
        std::memcpy(img_.data() + at, &v, sizeof(T));
    }

    // Parses the (patched) image from an exact-size heap copy, so ASan sees any overread.
    std::string error_of(const std::vector<uint8_t>& bytes) const {
        std::vector<uint8_t> copy(bytes);
        try {
            File::parse(copy, "bad.gguf");
        } catch (const Error& e) {
            return e.what();
        }
        return "(parsed without error)";
    }
    // The message must start with "bad.gguf: at byte N: " and contain every fragment.
    void expect_error(size_t at, std::initializer_list<const char*> fragments) const {
        expect_error_in(img_, at, fragments);
    }
    void expect_error_in(const std::vector<uint8_t>& bytes, size_t at,
                         std::initializer_list<const char*> fragments) const {
        const std::string msg = error_of(bytes);
        const std::string prefix = "bad.gguf: at byte " + std::to_string(at) + ": ";
        EXPECT_EQ(msg.rfind(prefix, 0), 0u) << msg << "\n  does not start with " << prefix;
        for (const char* f : fragments)
            EXPECT_NE(msg.find(f), std::string::npos) << msg << "\n  lacks: " << f;
        EXPECT_EQ(msg.find('\n'), std::string::npos) << "one line";
    }

    ScratchDir dir_;
    std::vector<uint8_t> img_;
};

TEST_F(GgufErrors, EmptyFile) { expect_error_in({}, 0, {"truncated magic", "found 0"}); }

TEST_F(GgufErrors, TruncatedHeader) {
    img_.resize(20);  // magic, version, tensor count, half of the metadata count
    expect_error(16, {"truncated metadata count", "expected 8 bytes, found 4"});
}

TEST_F(GgufErrors, BadMagic) {
    std::memcpy(img_.data(), "GGML", 4);
    expect_error(0, {"bad magic", "expected 0x46554747", "found 0x4c4d4747"});
}

TEST_F(GgufErrors, VersionOneAndFuture) {
    put<uint32_t>(4, 1);
    expect_error(4, {"unsupported GGUF version", "expected 2 or 3, found 1"});
    put<uint32_t>(4, 4);
    expect_error(4, {"found 4"});
    put<uint32_t>(4, 3u << 24);  // version 3 written big-endian
    expect_error(4, {"big-endian"});
}

TEST_F(GgufErrors, VersionTwoIsAccepted) {
    put<uint32_t>(4, 2);  // v2 has the same layout as v3 for little-endian files
    std::vector<uint8_t> copy(img_);
    EXPECT_EQ(File::parse(copy, "v2")->version(), 2u);
}

TEST_F(GgufErrors, HugeMetadataCount) {
    put<uint64_t>(16, uint64_t(1) << 60);
    expect_error(16, {"metadata count overflows the file", "found 1152921504606846976"});
    put<uint64_t>(16, UINT64_MAX);
    expect_error(16, {"metadata count overflows the file"});
}

TEST_F(GgufErrors, HugeTensorCount) {
    put<uint64_t>(8, uint64_t(1) << 58);
    expect_error(8, {"tensor count overflows the file", "found 288230376151711744"});
    put<uint64_t>(8, UINT64_MAX);
    expect_error(8, {"tensor count overflows the file"});
}

TEST_F(GgufErrors, KeyLengthOverflow) {
    put<uint64_t>(start_of("k1"), uint64_t(1) << 62);
    expect_error(24, {"key length overflows the file", "found 4611686018427387904"});
}

TEST_F(GgufErrors, EmptyKey) {
    const size_t at = start_of("k1");
    put<uint64_t>(at, 0);
    expect_error(at, {"empty key"});
}

TEST_F(GgufErrors, StringLengthOverflow) {
    const size_t at = after("k2") + 4;  // the string's u64 length
    put<uint64_t>(at, UINT64_MAX - 3);
    expect_error(at, {"string length overflows the file", "found 18446744073709551612"});
    put<uint64_t>(at, img_.size());  // just past the end
    expect_error(at, {"string length overflows the file"});
}

TEST_F(GgufErrors, UnknownValueType) {
    put<uint32_t>(after("k1"), 13);
    expect_error(after("k1"), {"unknown value type", "expected 0..12, found 13"});
}

TEST_F(GgufErrors, NestedArray) {
    const size_t at = after("k3") + 4;  // element type
    put<uint32_t>(at, uint32_t(ValueType::ARRAY));
    expect_error(at, {"nested array in key 'k3'", "found array"});
}

TEST_F(GgufErrors, UnknownArrayElementType) {
    const size_t at = after("k3") + 4;
    put<uint32_t>(at, 99);
    expect_error(at, {"unknown array element type", "found 99"});
}

TEST_F(GgufErrors, ArrayLengthOverflow) {
    const size_t at = after("k3") + 8;  // element count
    put<uint64_t>(at, 1000);  // 4000 bytes of i32, far more than the file has
    expect_error(at, {"array length of key 'k3' overflows the file", "of i32, found 1000"});
}

TEST_F(GgufErrors, ArrayLengthBeyondMemoryBudget) {
    const size_t at = after("k3") + 8;
    put<uint64_t>(at, uint64_t(1) << 62);
    expect_error(at, {"array length of key 'k3' exceeds the metadata budget",
                      "expected at most 16777216", "found 4611686018427387904 more after 0"});
}

TEST_F(GgufErrors, InvalidBool) {
    const size_t at = after("k4") + 4;
    img_[at] = 2;
    expect_error(at, {"invalid bool", "expected 0 or 1, found 2"});
}

TEST_F(GgufErrors, DuplicateKey) {
    const size_t at = start_of("k2");
    img_[at + 9] = '1';  // "k2" -> "k1"
    expect_error(at, {"duplicate key 'k1'"});
}

TEST_F(GgufErrors, AlignmentNotPowerOfTwo) {
    const size_t at = after("general.alignment");
    put<uint32_t>(at + 4, 3);
    expect_error(at, {"general.alignment is not a power of two", "found 3"});
    put<uint32_t>(at + 4, 0);
    expect_error(at, {"general.alignment is not a power of two", "found 0"});
}

TEST_F(GgufErrors, AlignmentWrongType) {
    const size_t at = after("general.alignment");
    put<uint32_t>(at, uint32_t(ValueType::INT32));
    expect_error(at, {"general.alignment has the wrong type", "expected u32, found i32"});
}

TEST_F(GgufErrors, UnknownTensorType) {
    put<uint32_t>(type_at("t2"), 31);  // a hole in ggml's numbering
    expect_error(type_at("t2"), {"tensor 't2' has an unknown type", "found 31"});
    put<uint32_t>(type_at("t2"), 0xffffffffu);
    expect_error(type_at("t2"), {"found 4294967295"});
}

TEST_F(GgufErrors, DimensionCount) {
    put<uint32_t>(n_dims_at("t1"), 0);
    expect_error(n_dims_at("t1"),
                 {"tensor 't1' has a bad dimension count", "expected 1..4, found 0"});
    put<uint32_t>(n_dims_at("t1"), 5);
    expect_error(n_dims_at("t1"), {"expected 1..4, found 5"});
}

TEST_F(GgufErrors, NegativeDimension) {
    put<int64_t>(ne0_at("t2"), -16);
    expect_error(ne0_at("t2"), {"tensor 't2' ne[0] is negative", "found -16"});
}

TEST_F(GgufErrors, ElementCountOverflow) {
    // Make t2 two-dimensional by taking over the next 8 bytes as ne[1]: the rest desyncs,
    // but the overflow is detected first.
    put<uint32_t>(n_dims_at("t2"), 2);
    put<uint64_t>(ne0_at("t2"), uint64_t(1) << 32);
    put<uint64_t>(ne0_at("t2") + 8, uint64_t(1) << 32);
    expect_error(ne0_at("t2") + 8, {"tensor 't2' element count overflows", "ne[1] = 4294967296"});
}

TEST_F(GgufErrors, ByteCountOverflow) {
    put<uint64_t>(ne0_at("t2"), uint64_t(1) << 62);  // 2^62 f32 = 2^64 bytes
    expect_error(type_at("t2"), {"tensor 't2' byte size overflows"});
}

TEST_F(GgufErrors, RowNotWholeBlocks) {
    put<uint64_t>(ne0_at("t1"), 33);
    expect_error(type_at("t1"), {"tensor 't1' row does not fill whole q8_0 blocks",
                                 "expected ne[0] a multiple of 32, found 33"});
}

TEST_F(GgufErrors, MisalignedOffset) {
    put<uint64_t>(offset_at("t2"), 130);
    expect_error(offset_at("t2"),
                 {"tensor 't2' offset is misaligned", "multiple of 64, found 130"});
}

TEST_F(GgufErrors, TensorOutOfRange) {
    put<uint64_t>(offset_at("t2"), 192);  // aligned, but its 64 bytes lie past the end
    expect_error(offset_at("t2"), {"tensor 't2' data is out of range", "offset 192 + 64 bytes"});
    put<uint64_t>(offset_at("t2"), uint64_t(1) << 63);  // offset + size would overflow
    expect_error(offset_at("t2"), {"tensor 't2' data is out of range"});
}

TEST_F(GgufErrors, OverlappingTensors) {
    put<uint64_t>(offset_at("t2"), 64);  // t1 covers [0, 68)
    expect_error(offset_at("t2"),
                 {"tensor 't2' overlaps tensor 't1'", "expected offset >= 68, found 64"});
    put<uint64_t>(offset_at("t2"), 0);
    expect_error(offset_at("t2"), {"overlaps"});
}

TEST_F(GgufErrors, DuplicateTensorName) {
    const size_t at = start_of("t2");
    img_[at + 9] = '1';  // "t2" -> "t1"
    expect_error(at, {"duplicate tensor name 't1'"});
}

TEST_F(GgufErrors, ControlBytesInNamesAreEscaped) {
    const size_t at = offset_at("t2");
    img_[start_of("t2") + 8] = '\n';  // tensor "t2" -> "\n2"
    put<uint64_t>(at, 130);
    expect_error(at, {"tensor '\\x0a2' offset is misaligned"});  // and one line (checked)
}

TEST_F(GgufErrors, DataSectionPastEndOfFile) {
    // Cut the file inside the padding before the data section.
    const uint64_t data_offset = File::parse(img_, "x")->data_offset();
    img_.resize(offset_at("t2") + 8 + 1);
    ASSERT_LT(img_.size(), data_offset);
    expect_error(offset_at("t2") + 8, {"data section starts beyond end of file"});
}

TEST_F(GgufErrors, EveryTruncationIsAnError) {
    // The base image ends exactly where t2's data ends, so every shorter prefix is broken.
    const std::vector<uint8_t> full = img_;
    for (size_t n = 0; n < full.size(); ++n) {
        std::vector<uint8_t> prefix(full.begin(), full.begin() + n);
        const std::string msg = error_of(prefix);
        ASSERT_EQ(msg.rfind("bad.gguf: at byte ", 0), 0u) << "length " << n << ": " << msg;
    }
}

TEST_F(GgufErrors, OpenReportsSystemErrors) {
    auto msg = [](const std::string& path) -> std::string {
        try {
            File::open(path);
        } catch (const Error& e) {
            return e.what();
        }
        return "(no error)";
    };
    const std::string missing = dir_.file("missing.gguf");
    EXPECT_NE(msg(dir_.file("")).find("is a directory"), std::string::npos) << msg(dir_.file(""));
    EXPECT_EQ(msg(missing).rfind(missing + ": cannot open", 0), 0u) << msg(missing);
    EXPECT_NE(msg(dir_.file("")).find("not a regular file"), std::string::npos);
    // A broken file on disk names its path.
    const std::string bad = dir_.file("bad.gguf");
    img_.resize(3);
    test::write_all(bad, img_);
    EXPECT_EQ(msg(bad).rfind(bad + ": at byte 0: truncated magic", 0), 0u) << msg(bad);
}

// Opening a FIFO for reading waits for a writer: the reader must refuse it by its type
// instead of blocking (issue 22 item 2). The alarm turns a hang into a failure.
TEST_F(GgufErrors, FifoIsRefusedWithoutBlocking) {
    const std::string fifo = dir_.file("model.gguf");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    for (const File::Load load : {File::Load::Map, File::Load::Copy}) {
        alarm(10);
        std::string msg = "(no error)";
        try {
            File::open(fifo, load);
        } catch (const Error& e) {
            msg = e.what();
        }
        alarm(0);
        EXPECT_EQ(msg.rfind(fifo + ": is a FIFO", 0), 0u) << msg;
        EXPECT_NE(msg.find("not a regular file"), std::string::npos) << msg;
    }
    // Character devices too (opening one may have effects; /dev/null would read as empty).
    std::string msg = "(no error)";
    try {
        File::open("/dev/null");
    } catch (const Error& e) {
        msg = e.what();
    }
    EXPECT_EQ(msg.rfind("/dev/null: is a character device", 0), 0u) << msg;
}

}  // namespace
}  // namespace ds4::gguf
