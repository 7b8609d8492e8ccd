// GGUF writer -> reader round trip: every value type, strings, arrays, tensors of several
// types, alignment, sparse holes; plus one byte-exact image built by hand from the format
// spec so that writer and reader cannot agree on a wrong layout.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "support/gguf_test_util.h"

namespace ds4::gguf {
namespace {

using test::pattern;
using test::read_all;
using test::ScratchDir;

// Appends little-endian fields, for the hand-built image.
struct Bytes {
    std::vector<uint8_t> b;
    template <class T>
    Bytes& pod(T v) {
        const auto* p = reinterpret_cast<const uint8_t*>(&v);
        b.insert(b.end(), p, p + sizeof(T));
        return *this;
    }
    Bytes& str(const std::string& s) {
        pod<uint64_t>(s.size());
        b.insert(b.end(), s.begin(), s.end());
        return *this;
    }
    Bytes& pad_to(size_t n) {
        b.resize(n, 0);
        return *this;
    }
};

TEST(GgufRoundTrip, ByteExactAgainstHandBuiltImage) {
    ScratchDir dir;
    const std::string path = dir.file("tiny.gguf");
    const float data[2] = {1.5f, -2.0f};
    {
        Writer w(path);
        w.set("a", Value::u32(7));
        w.add_tensor("t", TensorType::F32, {2});
        w.begin_data();
        w.write_tensor("t", {reinterpret_cast<const uint8_t*>(data), sizeof data});
        w.finish();
    }
    Bytes e;
    e.pod<uint32_t>(0x46554747).pod<uint32_t>(3).pod<uint64_t>(1).pod<uint64_t>(1);
    e.str("a").pod<uint32_t>(4).pod<uint32_t>(7);                     // key a: u32 7
    e.str("t").pod<uint32_t>(1).pod<uint64_t>(2).pod<uint32_t>(0).pod<uint64_t>(0);
    ASSERT_EQ(e.b.size(), 74u);
    e.pad_to(96);  // data section aligned to 32
    e.pod(data[0]).pod(data[1]);
    e.pad_to(128);  // the file ends aligned too
    EXPECT_EQ(read_all(path), e.b);
    EXPECT_EQ(std::memcmp(e.b.data(), "GGUF", 4), 0);

    auto f = File::open(path);
    EXPECT_EQ(f->version(), 3u);
    EXPECT_EQ(f->data_offset(), 96u);
    EXPECT_EQ(f->get_u32("a"), 7u);
    const TensorInfo& t = f->tensor("t");
    EXPECT_EQ(t.n_bytes, 8u);
    float back[2];
    std::memcpy(back, f->data(t), sizeof back);
    EXPECT_EQ(back[0], 1.5f);
    EXPECT_EQ(back[1], -2.0f);
    // The mapping starts on a 2 MiB boundary, so that the file's huge page-cache folios can be
    // mapped whole (reader.cpp); the copy holds the same bytes.
    const uint8_t* base = f->data(t) - f->data_offset() - t.offset;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(base) % (uintptr_t(2) << 20), 0u);
    auto copy = File::open(path, File::Load::Copy);
    EXPECT_EQ(std::memcmp(copy->data(copy->tensor("t")), f->data(t), 8), 0);
}

// --no-mmap reads the file in 2 MiB slices over several threads: a file of a few slices and a
// ragged end comes back byte for byte.
TEST(GgufRoundTrip, CopyOfSeveralSlicesEqualsTheFile) {
    ScratchDir dir;
    const std::string path = dir.file("slices.gguf");
    const int64_t n = (int64_t(5) << 20) / 4 + 1234;  // 5 MiB of f32 and then some
    std::vector<float> values(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) values[size_t(i)] = float(i % 9973) * 0.5f - float(i / 9973);
    {
        Writer w(path);
        w.add_tensor("big", TensorType::F32, {n});
        w.begin_data();
        w.write_tensor("big", {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)});
        w.finish();
    }
    auto copy = File::open(path, File::Load::Copy);
    const TensorInfo& t = copy->tensor("big");
    ASSERT_EQ(t.n_bytes, values.size() * sizeof(float));
    EXPECT_EQ(std::memcmp(copy->data(t), values.data(), t.n_bytes), 0);
    const auto file = read_all(path);  // the whole file, header and padding too
    const uint8_t* base = copy->data(t) - copy->data_offset() - t.offset;
    EXPECT_TRUE(std::equal(file.begin(), file.end(), base));
}

TEST(GgufRoundTrip, EveryValueType) {
    ScratchDir dir;
    const std::string path = dir.file("values.gguf");
    const std::string weird("nul\0byte \xe2\x9c\x93 \"q\"", 16);
    {
        Writer w(path);
        w.set("u8", Value::u8(255));
        w.set("i8", Value::i8(-128));
        w.set("u16", Value::u16(65535));
        w.set("i16", Value::i16(-32768));
        w.set("u32", Value::u32(4000000000u));
        w.set("i32", Value::i32(-2000000000));
        w.set("f32", Value::f32(-0.0f));
        w.set("f32.inf", Value::f32(std::numeric_limits<float>::infinity()));
        w.set("bool.t", Value::boolean(true));
        w.set("bool.f", Value::boolean(false));
        w.set("str", Value::str(weird));
        w.set("str.empty", Value::str(""));
        w.set("u64", Value::u64(UINT64_MAX));
        w.set("i64", Value::i64(INT64_MIN));
        w.set("f64", Value::f64(3.141592653589793));
        w.set("arr.u8", Value::array(ValueType::UINT8, {uint8_t(0), uint8_t(200)}));
        w.set("arr.i8", Value::array(ValueType::INT8, {int8_t(-1)}));
        w.set("arr.u16", Value::array(ValueType::UINT16, {uint16_t(1), uint16_t(65535)}));
        w.set("arr.i16", Value::array(ValueType::INT16, {int16_t(-300)}));
        w.set("arr.u32", Value::array_u32({1, 2, 3}));
        w.set("arr.i32", Value::array_i32({-1, 0, 1, INT32_MAX}));
        w.set("arr.f32", Value::array_f32({0.5f, -1e30f}));
        w.set("arr.bool", Value::array(ValueType::BOOL, {true, false, true}));
        w.set("arr.str", Value::array_str({"", "x", weird}));
        w.set("arr.u64", Value::array(ValueType::UINT64, {uint64_t(1) << 63}));
        w.set("arr.i64", Value::array(ValueType::INT64, {int64_t(-5)}));
        w.set("arr.f64", Value::array(ValueType::FLOAT64, {1e300, -0.25}));
        w.set("arr.empty", Value::array(ValueType::STRING, {}));
        w.set("replaced", Value::u8(1));
        w.set("replaced", Value::str("second"));  // set() replaces, keeps the first position
        w.begin_data();
        w.finish();
    }
    auto f = File::open(path);
    const auto& md = f->metadata();
    ASSERT_EQ(md.size(), 29u);
    EXPECT_EQ(md.front().first, "u8");  // file order is kept
    EXPECT_EQ(md.back().first, "replaced");
    EXPECT_EQ(f->get_string("replaced"), "second");
    EXPECT_EQ(f->find("f32.inf")->type, ValueType::FLOAT32);
    EXPECT_TRUE(std::isinf(f->get_f32("f32.inf")));

    auto scalar = [&](const char* k, ValueType t) {
        const Value* v = f->find(k);
        EXPECT_NE(v, nullptr) << k;
        if (!v) return Value::Scalar{};
        EXPECT_EQ(v->type, t) << k;
        return v->scalar;
    };
    EXPECT_EQ(std::get<uint8_t>(scalar("u8", ValueType::UINT8)), 255);
    EXPECT_EQ(std::get<int8_t>(scalar("i8", ValueType::INT8)), -128);
    EXPECT_EQ(std::get<uint16_t>(scalar("u16", ValueType::UINT16)), 65535);
    EXPECT_EQ(std::get<int16_t>(scalar("i16", ValueType::INT16)), -32768);
    EXPECT_EQ(std::get<uint32_t>(scalar("u32", ValueType::UINT32)), 4000000000u);
    EXPECT_EQ(std::get<int32_t>(scalar("i32", ValueType::INT32)), -2000000000);
    const float nz = std::get<float>(scalar("f32", ValueType::FLOAT32));
    EXPECT_TRUE(nz == 0.0f && std::signbit(nz));
    EXPECT_EQ(std::get<bool>(scalar("bool.t", ValueType::BOOL)), true);
    EXPECT_EQ(std::get<bool>(scalar("bool.f", ValueType::BOOL)), false);
    EXPECT_EQ(std::get<std::string>(scalar("str", ValueType::STRING)), weird);
    EXPECT_EQ(std::get<std::string>(scalar("str.empty", ValueType::STRING)), "");
    EXPECT_EQ(std::get<uint64_t>(scalar("u64", ValueType::UINT64)), UINT64_MAX);
    EXPECT_EQ(std::get<int64_t>(scalar("i64", ValueType::INT64)), INT64_MIN);
    EXPECT_EQ(std::get<double>(scalar("f64", ValueType::FLOAT64)), 3.141592653589793);

    auto array = [&](const char* k, ValueType et, size_t n) -> const Value& {
        const Value* v = f->find(k);
        EXPECT_NE(v, nullptr) << k;
        static const Value none;
        if (!v) return none;
        EXPECT_EQ(v->type, ValueType::ARRAY) << k;
        EXPECT_EQ(v->elem_type, et) << k;
        EXPECT_EQ(v->elems.size(), n) << k;
        return *v;
    };
    EXPECT_EQ(std::get<uint8_t>(array("arr.u8", ValueType::UINT8, 2).elems[1]), 200);
    EXPECT_EQ(std::get<int8_t>(array("arr.i8", ValueType::INT8, 1).elems[0]), -1);
    EXPECT_EQ(std::get<uint16_t>(array("arr.u16", ValueType::UINT16, 2).elems[1]), 65535);
    EXPECT_EQ(std::get<int16_t>(array("arr.i16", ValueType::INT16, 1).elems[0]), -300);
    EXPECT_EQ(array("arr.u32", ValueType::UINT32, 3).elem_int(2), 3);
    EXPECT_EQ(array("arr.i32", ValueType::INT32, 4).elem_int(3), INT32_MAX);
    EXPECT_EQ(array("arr.i32", ValueType::INT32, 4).elem_int(0), -1);
    EXPECT_EQ(array("arr.f32", ValueType::FLOAT32, 2).elem_double(1), double(-1e30f));
    EXPECT_EQ(std::get<bool>(array("arr.bool", ValueType::BOOL, 3).elems[1]), false);
    EXPECT_EQ(std::get<std::string>(array("arr.str", ValueType::STRING, 3).elems[2]), weird);
    EXPECT_EQ(std::get<uint64_t>(array("arr.u64", ValueType::UINT64, 1).elems[0]),
              uint64_t(1) << 63);
    EXPECT_EQ(array("arr.u64", ValueType::UINT64, 1).elem_int(0), std::nullopt);  // > i64 max
    EXPECT_EQ(std::get<int64_t>(array("arr.i64", ValueType::INT64, 1).elems[0]), -5);
    EXPECT_EQ(array("arr.f64", ValueType::FLOAT64, 2).elem_double(0), 1e300);
    array("arr.empty", ValueType::STRING, 0);
}

TEST(GgufRoundTrip, TypedGetters) {
    ScratchDir dir;
    const std::string path = dir.file("getters.gguf");
    {
        Writer w(path);
        w.set("small", Value::u8(9));
        w.set("neg", Value::i32(-1));
        w.set("big", Value::u64(uint64_t(1) << 40));
        w.set("half", Value::f64(0.5));
        w.set("s", Value::str("deepseek4"));
        w.set("arr", Value::array_u32({1}));
        w.set("b", Value::boolean(true));
        w.begin_data();
        w.finish();
    }
    auto f = File::open(path);
    EXPECT_EQ(f->get_u32("small"), 9u);         // any integer type that fits
    EXPECT_EQ(f->get_u64("big"), uint64_t(1) << 40);
    EXPECT_FLOAT_EQ(f->get_f32("small"), 9.0f);  // any numeric type
    EXPECT_FLOAT_EQ(f->get_f32("half"), 0.5f);
    EXPECT_EQ(f->get_string("s"), "deepseek4");
    EXPECT_TRUE(f->get_bool("b"));
    auto message = [&](auto fn) -> std::string {
        try {
            fn();
        } catch (const Error& e) {
            return e.what();
        }
        return "(no error)";
    };
    EXPECT_EQ(message([&] { f->get_u32("nope"); }), path + ": metadata key 'nope' missing");
    EXPECT_NE(message([&] { f->get_u32("neg"); }).find("'neg' has type i32"), std::string::npos);
    EXPECT_NE(message([&] { f->get_u32("big"); }).find("does not fit u32"), std::string::npos);
    EXPECT_NE(message([&] { f->get_string("small"); }).find("has type u8, expected string"),
              std::string::npos);
    EXPECT_NE(message([&] { f->get_u32("arr"); }).find("has type array of u32"),
              std::string::npos);
    EXPECT_NE(message([&] { f->get_bool("small"); }).find("expected bool"), std::string::npos);
    EXPECT_NE(message([&] { f->tensor("x"); }).find("tensor 'x' missing"), std::string::npos);
    EXPECT_EQ(f->find_tensor("x"), nullptr);
}

struct TensorCase {
    const char* name;
    TensorType type;
    std::vector<int64_t> ne;
    uint64_t n_bytes;  // from the format's block geometry, computed by hand
};

void round_trip_tensors(uint64_t alignment) {
    ScratchDir dir;
    const std::string path = dir.file("tensors.gguf");
    const std::vector<TensorCase> cases = {
        {"norm.weight", TensorType::F32, {7}, 28},                  // odd size forces padding
        {"emb.weight", TensorType::F16, {16, 3}, 96},
        {"bf.weight", TensorType::BF16, {5}, 10},
        {"q8.weight", TensorType::Q8_0, {64, 2}, 4 * 34},
        {"q2k.weight", TensorType::Q2_K, {256, 3}, 3 * 84},
        {"q4k.weight", TensorType::Q4_K, {512}, 2 * 144},
        {"iq2.weight", TensorType::IQ2_XXS, {256, 2, 2}, 4 * 66},
        {"mx.weight", TensorType::MXFP4, {32, 3, 2, 1}, 6 * 17},
        {"ids.weight", TensorType::I32, {3, 1}, 12},
    };
    {
        Writer w(path, alignment);
        w.set("general.architecture", Value::str("deepseek4"));
        for (const auto& c : cases) EXPECT_EQ(w.add_tensor(c.name, c.type, c.ne), c.n_bytes);
        w.begin_data();
        for (size_t i = 0; i < cases.size(); ++i)
            w.write_tensor(cases[i].name, pattern(cases[i].n_bytes, uint32_t(i)));
        w.finish();
    }
    auto f = File::open(path);
    EXPECT_EQ(f->alignment(), alignment);
    EXPECT_EQ(f->data_offset() % alignment, 0u);
    const Value* a = f->find("general.alignment");
    if (alignment == kDefaultAlignment) {
        EXPECT_EQ(a, nullptr);
    } else {
        ASSERT_NE(a, nullptr);
        EXPECT_EQ(a->type, ValueType::UINT32);
        EXPECT_EQ(a->as_uint(), alignment);
    }
    ASSERT_EQ(f->tensors().size(), cases.size());
    uint64_t end = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const TensorInfo& t = f->tensors()[i];
        SCOPED_TRACE(cases[i].name);
        EXPECT_EQ(t.name, cases[i].name);
        EXPECT_EQ(t.type, cases[i].type);
        EXPECT_EQ(t.n_dims, cases[i].ne.size());
        int64_t n = 1;
        for (size_t d = 0; d < 4; ++d) {
            const int64_t want = d < cases[i].ne.size() ? cases[i].ne[d] : 1;
            EXPECT_EQ(t.ne[d], want);
            n *= want;
        }
        EXPECT_EQ(t.n_elements(), n);
        EXPECT_EQ(t.n_bytes, cases[i].n_bytes);
        EXPECT_EQ(t.offset % alignment, 0u);
        EXPECT_GE(t.offset, end);  // declaration order, no overlap
        end = t.offset + t.n_bytes;
        EXPECT_EQ(f->find_tensor(cases[i].name), &t);
        const auto want = pattern(cases[i].n_bytes, uint32_t(i));
        EXPECT_EQ(std::memcmp(f->data(t), want.data(), want.size()), 0);
    }
    EXPECT_EQ(f->tensors()[1].shape_string(), "[16, 3]");
    EXPECT_EQ(f->tensors()[7].shape_string(), "[32, 3, 2, 1]");
    EXPECT_EQ(f->file_size() % alignment, 0u);
}

TEST(GgufRoundTrip, TensorsDefaultAlignment) { round_trip_tensors(32); }
TEST(GgufRoundTrip, TensorsAlignment64) { round_trip_tensors(64); }
TEST(GgufRoundTrip, TensorsAlignment4096) { round_trip_tensors(4096); }
TEST(GgufRoundTrip, TensorsAlignment1) { round_trip_tensors(1); }

TEST(GgufRoundTrip, SkippedTensorIsAHoleOfZeros) {
    ScratchDir dir;
    const std::string path = dir.file("sparse.gguf");
    const uint64_t big = 1 << 20;  // 1 MiB of Q8_0
    {
        Writer w(path);
        w.add_tensor("a", TensorType::F32, {8});
        w.add_tensor("hole", TensorType::Q8_0, {int64_t(big / 34 * 32)});
        w.add_tensor("b", TensorType::F16, {8});
        w.add_tensor("tail", TensorType::F32, {int64_t(big / 4)});  // trailing hole
        w.begin_data();
        w.write_tensor("a", pattern(32, 1));
        w.skip_tensor("hole");
        w.write_tensor("b", pattern(16, 2));
        w.skip_tensor("tail");
        w.finish();
    }
    auto f = File::open(path);
    const TensorInfo& tail = f->tensor("tail");
    EXPECT_EQ(f->file_size(), f->data_offset() + tail.offset + tail.n_bytes);
    for (const char* name : {"hole", "tail"}) {
        const TensorInfo& t = f->tensor(name);
        const uint8_t* p = f->data(t);
        size_t nonzero = 0;
        for (uint64_t i = 0; i < t.n_bytes; ++i) nonzero += p[i] != 0;
        EXPECT_EQ(nonzero, 0u) << name;
    }
    const auto b = pattern(16, 2);
    EXPECT_EQ(std::memcmp(f->data(f->tensor("b")), b.data(), 16), 0);
    // The holes take no disk space (on file systems with sparse files; tmpfs and ext4 both).
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_LT(uint64_t(st.st_blocks) * 512, f->file_size() / 2);
}

// Names of the entries of `dir`, sorted.
std::vector<std::string> entries(const std::string& dir) {
    std::vector<std::string> v;
    for (const auto& e : std::filesystem::directory_iterator(dir)) v.push_back(e.path().filename().string());
    std::sort(v.begin(), v.end());
    return v;
}

TEST(GgufRoundTrip, TemporaryFileUntilFinish) {
    ScratchDir dir;
    const std::string path = dir.file("model.gguf");
    const std::string root = std::filesystem::path(path).parent_path().string();
    {
        Writer w(path);
        w.add_tensor("t", TensorType::F32, {4});
        w.begin_data();
        // One temporary, named after the target with a random part, next to it.
        const auto e = entries(root);
        ASSERT_EQ(e.size(), 1u);
        EXPECT_EQ(e[0].rfind("model.gguf.", 0), 0u) << e[0];
        EXPECT_EQ(e[0].substr(e[0].size() - 4), ".tmp") << e[0];
        EXPECT_GT(e[0].size(), std::string("model.gguf..tmp").size() + 8) << e[0];
        EXPECT_FALSE(std::filesystem::exists(path));
        // abandoned: destructor must remove the temporary file
    }
    EXPECT_TRUE(entries(root).empty());
    {
        Writer w(path);
        w.add_tensor("t", TensorType::F32, {4});
        w.begin_data();
        w.write_tensor("t", pattern(16, 3));
        w.finish();
    }
    EXPECT_EQ(entries(root), std::vector<std::string>{"model.gguf"});
    // An abandoned rewrite leaves the finished file as it was.
    const auto before = test::read_all(path);
    {
        Writer w(path);
        w.add_tensor("t", TensorType::F32, {8});
        w.begin_data();
    }
    EXPECT_EQ(test::read_all(path), before);
    EXPECT_EQ(entries(root), std::vector<std::string>{"model.gguf"});
}

TEST(GgufRoundTrip, WriterRejectsMisuse) {
    ScratchDir dir;
    const std::string path = dir.file("misuse.gguf");
    auto throws = [](auto fn, const char* fragment) {
        try {
            fn();
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos)
                << e.what() << " lacks " << fragment;
            return;
        }
        ADD_FAILURE() << "no error; expected " << fragment;
    };
    throws([&] { Writer w(path, 24); }, "power of two");
    throws([&] { Writer w(path, 0); }, "power of two");
    Writer w(path);
    throws([&] { w.set("general.alignment", Value::u32(64)); }, "alignment");
    throws([&] { w.add_tensor("q", TensorType::Q8_0, {33}); }, "block size 32");
    throws([&] { w.add_tensor("d", TensorType::F32, {1, 1, 1, 1, 1}); }, "5 dimensions");
    throws([&] { w.add_tensor("n", TensorType::F32, {-1}); }, "< 0");
    throws([&] { w.add_tensor("o", TensorType::F32, {INT64_MAX, 2}); }, "overflows");
    throws([&] { w.add_tensor("u", TensorType(31), {4}); }, "unknown type");
    throws([&] { w.set("bad", Value::array(ValueType::ARRAY, {})); }, "not a scalar type");
    Value hand;
    hand.type = ValueType::STRING;  // but holds the default u8 alternative
    throws([&] { w.set("bad", hand); }, "does not hold a string");
    w.add_tensor("x", TensorType::F32, {2});
    w.add_tensor("y", TensorType::F32, {2});
    throws([&] { w.add_tensor("x", TensorType::F32, {2}); }, "duplicate tensor name 'x'");
    throws([&] { w.finish(); }, "before begin_data");
    w.begin_data();
    throws([&] { w.set("late", Value::u8(0)); }, "after begin_data");
    throws([&] { w.write_tensor("y", pattern(8, 0)); }, "expected 'x', found 'y'");
    throws([&] { w.write_tensor("x", pattern(7, 0)); }, "needs 8 bytes, found 7");
    w.write_tensor("x", pattern(8, 0));
    throws([&] { w.finish(); }, "1 of 2 tensors written (next is 'y')");
}

}  // namespace
}  // namespace ds4::gguf
