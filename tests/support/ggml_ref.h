// Test-only access to the oracle's ggml (prebuilt libggml-base + the best libggml-cpu
// variant for this CPU, from .cache/oracle): its quantizers, dequantizers and dot kernels, so
// tests can hold ours equal to them. Loaded with dlopen; the engine never links it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/tensor_type.h"

namespace ds4::oracle {

class Ggml {
public:
    // The process-wide instance, or nullptr when the oracle is not installed (tests then
    // fail with reason(); scripts/setup.sh installs it).
    static const Ggml* get();
    static const std::string& reason();  // why get() returned nullptr
    const std::string& cpu_variant() const { return variant_; }  // e.g. "zen4"

    int64_t blck_size(TensorType t) const;
    size_t type_size(TensorType t) const;
    // ggml_quantize_chunk over nrows rows of n_per_row values; imatrix: n_per_row weights.
    size_t quantize_chunk(TensorType t, const float* src, void* dst, int64_t nrows,
                          int64_t n_per_row, const float* imatrix) const;
    // type_traits[t].to_float (dequantize n values).
    void to_float(TensorType t, const void* src, float* dst, int64_t n) const;
    // CPU traits: activation conversion into t's format (from_float) ...
    void from_float(TensorType t, const float* src, void* dst, int64_t n) const;
    // ... and vec_dot of a weight row of type t with an activation row in vec_dot_type(t).
    float vec_dot(TensorType t, int64_t n, const void* w, const void* act) const;
    TensorType vec_dot_type(TensorType t) const;

    struct Api;
private:
    Ggml() = default;
    const Api* api_ = nullptr;
    std::string variant_;
};

}  // namespace ds4::oracle
