// Small helpers for the *_avx2.cpp / *_avx512.cpp kernel files only (they need those files'
// instruction-set flags). Internal linkage on purpose: the same inline function compiled with
// AVX-512 flags in one file must not be picked by the linker for an AVX2-only file.
#pragma once

// GCC 12 flags the deliberately undefined source operand of some AVX-512 intrinsics
// (_mm512_undefined_*) as uninitialised; the diagnostic is located in immintrin.h, so it is
// silenced before that header is first included. Include this header before any other.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include <cstdint>

namespace ds4::quant {
namespace {

// F16 -> F32 with F16C; equal to f16_to_f32 (common/half.h) for every non-NaN input.
[[maybe_unused]] inline float f16c_to_f32(uint16_t h) { return _cvtsh_ss(h); }

[[maybe_unused]] inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace ds4::quant
