// Quantisation-aware-training simulations of the official model (spec/ARCHITECTURE.md §3.0).
// The published weights were trained with them, so the engine applies them by default; the
// llama.cpp oracle omits them, so comparisons against it turn them off.
#pragma once

#include <cstdint>

namespace ds4::ops {

// Rounds v to the nearest E4M3FN value (ties to even mantissa); |v| must be <= 448.
float e4m3_round(float v);
// Rounds v to the nearest E2M1 magnitude in {0, .5, 1, 1.5, 2, 3, 4, 6} (ties to the even grid
// index), keeping the sign; |v| must be <= 6.
float e2m1_round(float v);

// FP8 round trip of x[0..n) in blocks of 64 with power-of-two scales:
// s = 2^ceil(log2(max(amax, 1e-4) / 448)); x <- s * E4M3(x / s). The published shapes use whole
// blocks (448 = 7 x 64); for test shapes a shorter last block is its own block.
void fp8_roundtrip(float* x, int64_t n);
// FP4 round trip of x[0..n) in blocks of 32 (shorter last block allowed):
// s = 2^ceil(log2(max(amax, 6*2^-126) / 6)).
void fp4_roundtrip(float* x, int64_t n);
// Orthonormal Walsh-Hadamard transform of n values (n a power of two): x <- H x / sqrt(n).
void hadamard(float* x, int64_t n);

}  // namespace ds4::ops
