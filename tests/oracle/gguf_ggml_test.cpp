// Our GGUF writer and reader against ggml's own gguf parser (prebuilt libggml-base from the
// oracle): files we write must load in ggml with the same keys, types, offsets and data
// offset, and the seed corpus must be judged alike (valid_* accepted, broken_* rejected).
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <string>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"

namespace ds4::gguf {
namespace {

namespace fs = std::filesystem;

// The few gguf.h entry points we need (signatures from ggml/include/gguf.h).
struct GgufApi {
    struct InitParams {
        bool no_alloc;
        void** ctx;
    };
    void* (*init_from_file)(const char*, InitParams);
    void (*free)(void*);
    uint32_t (*get_version)(const void*);
    size_t (*get_alignment)(const void*);
    size_t (*get_data_offset)(const void*);
    int64_t (*get_n_kv)(const void*);
    const char* (*get_key)(const void*, int64_t);
    int (*get_kv_type)(const void*, int64_t);
    int (*get_arr_type)(const void*, int64_t);
    size_t (*get_arr_n)(const void*, int64_t);
    int64_t (*get_n_tensors)(const void*);
    const char* (*get_tensor_name)(const void*, int64_t);
    size_t (*get_tensor_offset)(const void*, int64_t);
    int (*get_tensor_type)(const void*, int64_t);
    size_t (*get_tensor_size)(const void*, int64_t);

    static const GgufApi* get() {
        static GgufApi api;
        static bool ok = api.load();
        return ok ? &api : nullptr;
    }

private:
    template <class F>
    bool sym(void* h, const char* name, F& f) {
        f = reinterpret_cast<F>(dlsym(h, name));
        return f != nullptr;
    }
    bool load() {
        const std::string lib = std::string(DS4_ORACLE_BIN) + "/libggml-base.so";
        void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!h) return false;
        return sym(h, "gguf_init_from_file", init_from_file) && sym(h, "gguf_free", free) &&
               sym(h, "gguf_get_version", get_version) &&
               sym(h, "gguf_get_alignment", get_alignment) &&
               sym(h, "gguf_get_data_offset", get_data_offset) &&
               sym(h, "gguf_get_n_kv", get_n_kv) && sym(h, "gguf_get_key", get_key) &&
               sym(h, "gguf_get_kv_type", get_kv_type) &&
               sym(h, "gguf_get_arr_type", get_arr_type) && sym(h, "gguf_get_arr_n", get_arr_n) &&
               sym(h, "gguf_get_n_tensors", get_n_tensors) &&
               sym(h, "gguf_get_tensor_name", get_tensor_name) &&
               sym(h, "gguf_get_tensor_offset", get_tensor_offset) &&
               sym(h, "gguf_get_tensor_type", get_tensor_type) &&
               sym(h, "gguf_get_tensor_size", get_tensor_size);
    }
};

const GgufApi& api() {
    const GgufApi* a = GgufApi::get();
    if (!a) throw std::runtime_error("libggml-base.so not loadable from " DS4_ORACLE_BIN
                                     " (run scripts/setup.sh)");
    return *a;
}

void* ggml_open(const std::string& path) {
    return api().init_from_file(path.c_str(), {true, nullptr});
}

// Everything our reader sees must be what ggml sees.
void expect_same_view(const std::string& path) {
    auto ours = File::open(path);
    void* g = ggml_open(path);
    ASSERT_NE(g, nullptr) << "ggml rejects " << path;
    const GgufApi& a = api();
    EXPECT_EQ(a.get_version(g), ours->version());
    EXPECT_EQ(a.get_alignment(g), ours->alignment());
    if (!ours->tensors().empty()) {
        EXPECT_EQ(a.get_data_offset(g), ours->data_offset());
    }
    ASSERT_EQ(a.get_n_kv(g), int64_t(ours->metadata().size()));
    for (size_t i = 0; i < ours->metadata().size(); ++i) {
        const auto& [key, v] = ours->metadata()[i];
        EXPECT_EQ(a.get_key(g, int64_t(i)), key);
        EXPECT_EQ(a.get_kv_type(g, int64_t(i)), int(v.type)) << key;
        if (v.is_array()) {
            EXPECT_EQ(a.get_arr_type(g, int64_t(i)), int(v.elem_type)) << key;
            EXPECT_EQ(a.get_arr_n(g, int64_t(i)), v.elems.size()) << key;
        }
    }
    ASSERT_EQ(a.get_n_tensors(g), int64_t(ours->tensors().size()));
    for (size_t i = 0; i < ours->tensors().size(); ++i) {
        const TensorInfo& t = ours->tensors()[i];
        EXPECT_EQ(a.get_tensor_name(g, int64_t(i)), t.name);
        EXPECT_EQ(a.get_tensor_offset(g, int64_t(i)), t.offset) << t.name;
        EXPECT_EQ(a.get_tensor_type(g, int64_t(i)), int(t.type)) << t.name;
        EXPECT_EQ(a.get_tensor_size(g, int64_t(i)), t.n_bytes) << t.name;
    }
    a.free(g);
}

class GgufGgml : public ::testing::Test {
protected:
    void SetUp() override {
        ASSERT_NO_THROW(api());
        std::string tmpl = ::testing::TempDir() + "ds4_gguf_ggml_XXXXXX";
        ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
        dir_ = tmpl;
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(dir_, ec);
    }
    fs::path dir_;
};

TEST_F(GgufGgml, WriterOutputLoadsInGgml) {
    for (uint64_t alignment : {32u, 64u, 1024u}) {
        SCOPED_TRACE(alignment);
        const std::string path = (dir_ / ("w" + std::to_string(alignment) + ".gguf")).string();
        {
            Writer w(path, alignment);
            w.set("general.architecture", Value::str("deepseek4"));
            w.set("u8", Value::u8(1));
            w.set("i8", Value::i8(-1));
            w.set("u16", Value::u16(2));
            w.set("i16", Value::i16(-2));
            w.set("u32", Value::u32(3));
            w.set("i32", Value::i32(-3));
            w.set("f32", Value::f32(0.5f));
            w.set("bool", Value::boolean(true));
            w.set("u64", Value::u64(4));
            w.set("i64", Value::i64(-4));
            w.set("f64", Value::f64(0.25));
            w.set("tokens", Value::array_str({"a", "", "<|x|>"}));
            w.set("ids", Value::array_i32({1, 2, 3, 4}));
            w.set("scores", Value::array_f32({0.5f}));
            w.set("flags", Value::array(ValueType::BOOL, {true, false}));
            w.set("empty", Value::array(ValueType::UINT64, {}));
            const std::pair<const char*, TensorType> types[] = {
                {"f32", TensorType::F32},     {"f16", TensorType::F16},
                {"bf16", TensorType::BF16},   {"q8_0", TensorType::Q8_0},
                {"q2_k", TensorType::Q2_K},   {"q4_k", TensorType::Q4_K},
                {"iq2_xxs", TensorType::IQ2_XXS}, {"mxfp4", TensorType::MXFP4},
            };
            for (const auto& [name, type] : types) w.add_tensor(name, type, {256, 3});
            w.begin_data();
            bool skip = false;
            for (const auto& [name, type] : types) {
                if ((skip = !skip)) {
                    w.skip_tensor(name);
                } else {
                    const size_t n = size_t(row_bytes(type, 256)) * 3;
                    w.write_tensor(name, std::vector<uint8_t>(n, 0x11));
                }
            }
            w.finish();
        }
        expect_same_view(path);
    }
}

TEST_F(GgufGgml, CorpusJudgedAlike) {
    const fs::path src =
        fs::path(DS4_SOURCE_DIR) / "fuzz" / "corpus" / "gguf";
    size_t n = 0;
    for (const auto& e : fs::directory_iterator(src)) {
        const std::string name = e.path().filename().string();
        bool ours = true;
        try {
            File::open(e.path().string());
        } catch (const Error&) {
            ours = false;
        }
        void* g = ggml_open(e.path().string());
        EXPECT_EQ(ours, g != nullptr) << name << ": ours " << (ours ? "accepts" : "rejects");
        if (name.rfind("valid_", 0) == 0 && g) expect_same_view(e.path().string());
        if (g) api().free(g);
        ++n;
    }
    EXPECT_GE(n, 10u);
}

}  // namespace
}  // namespace ds4::gguf
