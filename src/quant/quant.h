// Weight and activation formats: conversion to/from f32 and the dot-product kernels the
// matrix products are built on.
//
// Weight formats: F32, F16, BF16, Q8_0, Q4_0, Q2_K, Q4_K, Q5_K, Q6_K, IQ2_XXS, MXFP4. As in
// ggml's CPU backend, a dot product takes the activation side already converted to the
// weight's dot type (dot_type(): F32->F32, F16->F16, BF16->BF16, Q8_0/Q4_0/MXFP4->Q8_0,
// Q2_K/Q4_K/Q5_K/Q6_K/IQ2_XXS->Q8_K), so results are comparable with the oracle.
//
// Every dot kernel exists as a scalar reference and, where the CPU allows, AVX2 and
// AVX-512 VNNI versions chosen at run time; tests hold each SIMD kernel equal to its scalar
// reference.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "gguf/tensor_type.h"

namespace ds4::quant {

enum class Isa : int { Scalar = 0, Avx2 = 1, Avx512Vnni = 2 };
constexpr int kIsaCount = 3;
const char* isa_name(Isa isa);
bool isa_supported(Isa isa);  // by this CPU (and OS)
// The best supported ISA, capped by the DS4_ISA environment variable if set
// ("scalar", "avx2", "avx512").
Isa best_isa();
// Caps best_isa() for the whole process (tests compare kernels' summation orders this way).
void set_isa_cap(Isa cap);

// Dot product of n values: one weight row (blocks of its format) with one activation row in
// dot_type(weight format).
using DotFn = float (*)(int64_t n, const void* w, const void* act);
using DequantizeFn = void (*)(const void* src, float* dst, int64_t n);
// importance: per-value weights of the reconstruction error (length n) or nullptr.
using QuantizeFn = void (*)(const float* src, void* dst, int64_t n, const float* importance);

// Several weight rows against several activation rows at once (the batched matmul's
// kernel): for r < rows and t < n_act,
//   y[t][r] = dot_kernel(w, isa)(n, W + r * w_stride, act[t])
// BIT-IDENTICAL to that per-row dot (same accumulation order), so a batched prefill equals
// token-by-token decoding. Each weight block is loaded and decoded once per few activations.
using MultiDotFn = void (*)(int64_t n, const void* W, size_t w_stride, int64_t rows,
                            const void* const* act, int64_t n_act, float* const* y);

// Everything the engine knows about one weight format, in one record per format, defined in
// the format's folder (q8_0/q8_0.cpp, ...) and listed once in the registry (formats.h). The
// block geometry and the name are the GGUF type's (gguf/tensor_type.h).
struct FormatOps {
    TensorType type;
    TensorType dot_type;      // activation format its dot kernels take
    DequantizeFn dequantize;  // blocks -> f32
    QuantizeFn quantize;      // f32 -> blocks (reference quantizer)
    DotFn dot[kIsaCount];     // indexed by Isa; nullptr where that ISA has no kernel
    // The multi-row kernel per ISA, matching dot[] of the same index; all nullptr for a format
    // without one (callers loop over the dot kernel).
    MultiDotFn multi[kIsaCount];
    DotFn ggml_compat;        // the ggml compatibility kernel (ggml_compat/ggml_compat.h)
    // See multi_dot_for_one_activation() and multi_dot_blocks_rows() below.
    bool multi_for_one_activation;
    bool multi_blocks_rows;
};

// The format table entry, or nullptr for a type with no kernels here.
const FormatOps* format_ops(TensorType t);
bool is_weight_format(TensorType t);  // one of the weight formats above
// The weight formats' names, comma-separated (for messages).
std::string weight_format_names();
TensorType dot_type(TensorType weight);  // throws ds4::Error for an unsupported type

// Row conversions; n must be a multiple of the format's block size (ds4::Error otherwise).
void dequantize_row(TensorType t, const void* src, float* dst, int64_t n);
void quantize_row(TensorType t, const float* src, void* dst, int64_t n,
                  const float* importance = nullptr);
// Converts activations to an activation format: F32 (copy), F16, BF16, Q8_0 or Q8_K.
void quantize_activation(TensorType act_type, const float* src, void* dst, int64_t n);

// ggml compatibility mode (test-only, slower; docs/ORACLE_HARNESS.md): while on, dot_kernel()
// returns, whatever the ISA, a kernel whose floating-point operations (accumulator lanes, fma
// vs mul+add, horizontal-sum tree) reproduce bit for bit the oracle's CPU vec_dot as its zen4
// (AVX-512) build runs it (ggml_compat/ggml_compat.h; each format's FormatOps::ggml_compat),
// and batched kernels are not used. Off by default; on at start-up when the environment
// variable DS4_GGML_COMPAT is "1".
void set_ggml_compat(bool on);
bool ggml_compat();

// The kernel for weights of type w on `isa`, falling back to the next lower ISA that has one
// (Scalar always exists); the compat kernel instead while ggml_compat() is on.
DotFn dot_kernel(TensorType w, Isa isa);
inline DotFn dot_kernel(TensorType w) { return dot_kernel(w, best_isa()); }

// The multi-row kernel matching dot_kernel(w, isa) (same ISA fallback), or nullptr where
// that format has none and while ggml_compat() is on (callers then loop over dot_kernel).
MultiDotFn multi_dot_kernel(TensorType w, Isa isa);
inline MultiDotFn multi_dot_kernel(TensorType w) { return multi_dot_kernel(w, best_isa()); }
// Whether the multi-row kernel is also the faster way to run one activation over many rows
// (decode): true for Q8_0, whose one-row dot is its multi-row kernel with one row
// (q8_0/q8_0_multi_avx512.cpp), IQ2_XXS, whose AVX-512 kernels reorder the activation once
// per call there instead of once per row, and Q2_K, whose multi-row kernels loop over the
// rows with the one-row dot (no call and constants per 2048-column row); the other formats'
// one-row dots are faster there. False for a type with no kernels here.
bool multi_dot_for_one_activation(TensorType w);
// Whether the AVX-512 multi-row kernel works through its weight rows in blocks (transposed or
// decoded into L2 once, then every tile of activations over each block), so it reads each
// weight row once per call however many rows a call gets: Q8_0 and IQ2_XXS. The others run
// every weight row once per tile of activations and want a call's rows to fit in L2.
bool multi_dot_blocks_rows(TensorType w);

}  // namespace ds4::quant
