// Building blocks of the ggml compatibility kernels (ggml_compat.h): SIMD accumulators as
// arrays of float lanes and the exact reduction trees the oracle's compiled code uses.
// Internal to the ggml_compat*.cpp files.
#pragma once

#include <cstdint>

namespace ds4::quant::compat {

// A product rounded to float on its own. The empty asm hides the value from the optimizer so
// that it cannot contract the product with a following add into an fma (GCC does so with
// -ffp-contract=fast whenever the target has FMA).
inline float rounded(float v) {
    __asm__("" : "+x"(v));
    return v;
}

// hsum_float_8 of quants.c on lanes v[0..7]: (v[i] + v[i+4]) for i < 4, then
// ((r0 + r2) + (r1 + r3)). Float addition commutes, so only the pairing matters.
inline float hsum8(const float* v) {
    float r[4];
    for (int i = 0; i < 4; ++i) r[i] = v[i] + v[i + 4];
    return (r[0] + r[2]) + (r[1] + r[3]);
}

// GCC's _mm512_reduce_add_ps on 16 lanes: upper 8 + lower 8, then the same tree as hsum8.
inline float hsum16(const float* v) {
    float h[8];
    for (int i = 0; i < 8; ++i) h[i] = v[i] + v[i + 8];
    return hsum8(h);
}

// Four lanes: (v0 + v2) + (v1 + v3) (movehl, then movehdup).
inline float hsum4(const float* v) { return (v[0] + v[2]) + (v[1] + v[3]); }

// _mm256_sign_epi8(y, s) on one byte: y negated where s < 0 (in 8 bits, so -(-128) stays -128),
// zero where s == 0.
inline int sign_byte(int8_t y, int8_t s) {
    if (s == 0) return 0;
    if (s > 0) return y;
    return int(int8_t(uint8_t(-int(y))));
}

// |x| * sign_byte(y, x): ggml's signed x unsigned byte product (_mm256_sign_epi8 twice, then
// maddubs or dpbusd). Equal to x * y except for y == -128 with x < 0.
inline int signed_product(int8_t x, int8_t y) {
    const int ax = x < 0 ? -int(x) : int(x);  // as an unsigned byte, so |-128| = 128
    return ax * sign_byte(y, x);
}

}  // namespace ds4::quant::compat
