// AVX2 + FMA + F16C dots of the float formats. Like every *_avx2.cpp this file is compiled
// with -mavx2 and only called after CPU detection; it includes no shared inline helpers
// (common/half.h) so that no AVX2-compiled copy of them can be picked by the linker for
// baseline code.
#include <immintrin.h>

#include "quant/float/float_formats.h"

namespace ds4::quant::avx2 {
namespace {

inline float hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

inline __m256 load_f16(const uint16_t* p) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline __m256 load_bf16(const uint16_t* p) {
    const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}
inline float f16_scalar(uint16_t h) { return _cvtsh_ss(h); }
inline float bf16_scalar(uint16_t h) {
    const uint32_t u = uint32_t(h) << 16;
    float f;
    __builtin_memcpy(&f, &u, 4);
    return f;
}

// Four independent accumulators hide the FMA latency; Load(p) yields 8 floats.
template <class T, class Load, class Scalar>
float dot(int64_t n, const T* x, const T* y, Load load, Scalar scalar) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load(x + i), load(y + i), a0);
        a1 = _mm256_fmadd_ps(load(x + i + 8), load(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(load(x + i + 16), load(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load(x + i + 24), load(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_fmadd_ps(load(x + i), load(y + i), a0);
    float sum = hsum(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; ++i) sum += scalar(x[i]) * scalar(y[i]);
    return sum;
}

}  // namespace

float dot_f32(int64_t n, const void* w, const void* act) {
    return dot(n, static_cast<const float*>(w), static_cast<const float*>(act),
               [](const float* p) { return _mm256_loadu_ps(p); }, [](float v) { return v; });
}

float dot_f16(int64_t n, const void* w, const void* act) {
    return dot(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(act), load_f16,
               f16_scalar);
}

float dot_bf16(int64_t n, const void* w, const void* act) {
    return dot(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(act), load_bf16,
               bf16_scalar);
}

void f32_to_f16_row(const float* x, uint16_t* y, int64_t n) {
    constexpr int kRound = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128(reinterpret_cast<__m128i*>(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), kRound));
    for (; i < n; ++i) y[i] = uint16_t(_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(x[i]), kRound), 0));
}

}  // namespace ds4::quant::avx2
