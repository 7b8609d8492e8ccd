// ggml compatibility kernels (test-only): dot products whose floating-point operations happen
// in exactly the order of the oracle's CPU `vec_dot` as llama.cpp's prebuilt zen4 variant of
// libggml-cpu runs it (AVX-512 build: F32/F16 in 4 x 16 lanes, BF16 with VDPBF16PS; every
// quantized format through its AVX2 code, 8 lanes of 4 products each), so that a result is
// bit-identical to the oracle's. quant.h's ggml_compat() switch routes dot_kernel() here.
//
// Why: a matrix product's activation is re-quantized (Q8_0, Q8_K, F16, BF16) before the next
// product, and a one-ulp difference in a float sum can flip an int8 code there; small random
// models amplify such flips. Bit-exact dots take the summation order out of the comparison.
//
// How: portable scalar code that keeps ggml's SIMD accumulators as arrays of lanes and applies
// each rounding step explicitly (std::fma where ggml fuses, a separately rounded product where
// it does not, its horizontal-sum trees, its double-precision tails, its int8 sign tricks). The
// integer parts are exact in any order; only the lane each product lands in matters. Facts come
// from the bundled llama.cpp source (ggml-cpu/vec.cpp, simd-mappings.h, arch/x86/quants.c) and
// the compiled library (e.g. the F32 tail: 16- and 8-wide mul+add, then scalar fma). Slow
// (a tiny-model run takes ~10x the CPU time of the fast kernels); never the default.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"
#include "quant/quant.h"

namespace ds4::quant::compat {

// The compat kernel for weights of type w, or nullptr when there is none (not a weight format).
DotFn dot_kernel(TensorType w);

// One per weight format; arguments as DotFn (n values, weight row, activation row in
// dot_type(weight)). n: any for F32/F16/BF16, a multiple of the block size otherwise.
float dot_f32(int64_t n, const void* w, const void* act);
float dot_f16(int64_t n, const void* w, const void* act);
float dot_bf16(int64_t n, const void* w, const void* act);
float dot_q8_0(int64_t n, const void* w, const void* act);
float dot_q4_0(int64_t n, const void* w, const void* act);
float dot_mxfp4(int64_t n, const void* w, const void* act);
float dot_q2_k(int64_t n, const void* w, const void* act);
float dot_q4_k(int64_t n, const void* w, const void* act);
float dot_q5_k(int64_t n, const void* w, const void* act);
float dot_q6_k(int64_t n, const void* w, const void* act);
float dot_iq2_xxs(int64_t n, const void* w, const void* act);

// One VDPBF16PS lane step as the instruction defines it: acc + a1*b1 (the odd pair element
// first), then + a0*b0, each a single-rounding fma with denormal inputs read as zero and
// denormal results flushed to zero. Exposed for the test that holds it to the instruction.
float bf16_pair_step(float acc, uint16_t a0, uint16_t a1, uint16_t b0, uint16_t b1);

}  // namespace ds4::quant::compat
