#include "support/ggml_ref.h"

#include <dlfcn.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

namespace ds4::oracle {

// Mirrors of the few ggml declarations we call (ggml.h / ggml-cpu.h of the bundled source);
// only layouts of the leading fields we read are relied upon.
namespace {
using to_float_t = void (*)(const void*, float*, int64_t);
using from_float_t = void (*)(const float*, void*, int64_t);
using vec_dot_t = void (*)(int, float*, size_t, const void*, size_t, const void*, size_t, int);
struct TypeTraits {        // struct ggml_type_traits
    const char* type_name;
    int64_t blck_size;
    int64_t blck_size_interleave;
    size_t type_size;
    bool is_quantized;
    to_float_t to_float;
    from_float_t from_float_ref;
};
struct CpuTraits {         // struct ggml_type_traits_cpu
    from_float_t from_float;
    vec_dot_t vec_dot;
    int vec_dot_type;
    int64_t nrows;
};
}  // namespace

struct Ggml::Api {
    const TypeTraits* (*get_type_traits)(int);
    size_t (*quantize_chunk)(int, const float*, void*, int64_t, int64_t, int64_t, const float*);
    void (*quantize_init)(int);
    const CpuTraits* (*get_type_traits_cpu)(int);
    void (*cpu_init)();
};

namespace {
std::string g_reason;

std::string oracle_bin_dir() {
    if (const char* env = std::getenv("DS4_ORACLE_BIN")) return env;
    return DS4_ORACLE_BIN;
}

template <class F>
F sym(void* lib, const char* name) {
    void* p = dlsym(lib, name);
    if (!p) throw std::runtime_error(std::string("missing symbol ") + name);
    return reinterpret_cast<F>(p);
}

const Ggml* load(Ggml* g, Ggml::Api* api, std::string* variant) {
    const std::string dir = oracle_bin_dir();
    void* base = dlopen((dir + "/libggml-base.so").c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (!base) throw std::runtime_error(std::string("cannot load libggml-base: ") + dlerror());
    // Pick the CPU variant as ggml's backend loader does: the highest ggml_backend_score.
    void* best = nullptr;
    int best_score = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir)) {
        const std::string name = e.path().filename().string();
        if (name.rfind("libggml-cpu-", 0) != 0) continue;
        void* lib = dlopen(e.path().c_str(), RTLD_NOW | RTLD_LOCAL);
        if (!lib) continue;
        auto score_fn = reinterpret_cast<int (*)()>(dlsym(lib, "ggml_backend_score"));
        const int score = score_fn ? score_fn() : 0;
        if (score > best_score) {
            best_score = score;
            best = lib;
            *variant = name.substr(12, name.size() - 12 - 3);
        }
    }
    if (!best) throw std::runtime_error("no usable libggml-cpu-*.so in " + dir);
    api->get_type_traits = sym<decltype(api->get_type_traits)>(base, "ggml_get_type_traits");
    api->quantize_chunk = sym<decltype(api->quantize_chunk)>(base, "ggml_quantize_chunk");
    api->quantize_init = sym<decltype(api->quantize_init)>(base, "ggml_quantize_init");
    api->get_type_traits_cpu =
        sym<decltype(api->get_type_traits_cpu)>(best, "ggml_get_type_traits_cpu");
    api->cpu_init = sym<decltype(api->cpu_init)>(best, "ggml_cpu_init");
    api->cpu_init();
    return g;
}
}  // namespace

const Ggml* Ggml::get() {
    static Ggml instance;
    static Api api;
    static const Ggml* ptr = [] () -> const Ggml* {
        try {
            load(&instance, &api, &instance.variant_);
            instance.api_ = &api;
            return &instance;
        } catch (const std::exception& e) {
            g_reason = std::string("llama.cpp oracle unavailable (run scripts/setup.sh): ") + e.what();
            return nullptr;
        }
    }();
    return ptr;
}

const std::string& Ggml::reason() { return g_reason; }

int64_t Ggml::blck_size(TensorType t) const { return api_->get_type_traits(int(t))->blck_size; }
size_t Ggml::type_size(TensorType t) const { return api_->get_type_traits(int(t))->type_size; }

size_t Ggml::quantize_chunk(TensorType t, const float* src, void* dst, int64_t nrows,
                            int64_t n_per_row, const float* imatrix) const {
    return api_->quantize_chunk(int(t), src, dst, 0, nrows, n_per_row, imatrix);
}

void Ggml::to_float(TensorType t, const void* src, float* dst, int64_t n) const {
    api_->get_type_traits(int(t))->to_float(src, dst, n);
}

void Ggml::from_float(TensorType t, const float* src, void* dst, int64_t n) const {
    const CpuTraits* c = api_->get_type_traits_cpu(int(t));
    if (c->from_float) c->from_float(src, dst, n);
    else api_->get_type_traits(int(t))->from_float_ref(src, dst, n);
}

float Ggml::vec_dot(TensorType t, int64_t n, const void* w, const void* act) const {
    float out = 0;
    api_->get_type_traits_cpu(int(t))->vec_dot(int(n), &out, 0, w, 0, act, 0, 1);
    return out;
}

TensorType Ggml::vec_dot_type(TensorType t) const {
    return TensorType(api_->get_type_traits_cpu(int(t))->vec_dot_type);
}

}  // namespace ds4::oracle
