// AVX-512 dots of the float formats (compiled with -mavx512*, called only after CPU
// detection; no shared inline helpers included, see float_avx2.cpp). Tails use masked loads.
// GCC 12 warns falsely inside its own AVX-512 headers (_mm512_undefined_*, GCC PR105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "quant/float/float_formats.h"
#include "quant/prefetch.h"

namespace ds4::quant::avx512 {
namespace {

struct F32 {
    static __m512 load(const float* p) { return _mm512_loadu_ps(p); }
    static __m512 load_tail(const float* p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
};
struct F16 {
    static __m512 load(const uint16_t* p) {
        return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static __m512 load_tail(const uint16_t* p, __mmask16 m) {
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    }
};
struct BF16 {
    static __m512 widen(__m256i h) {
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    static __m512 load(const uint16_t* p) {
        return widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    }
    static __m512 load_tail(const uint16_t* p, __mmask16 m) {
        return widen(_mm256_maskz_loadu_epi16(m, p));
    }
};

template <class Fmt, class T>
float dot(int64_t n, const T* x, const T* y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        // The weights (x) are read once, from DRAM in decode: ask for them ahead
        // (quant/prefetch.h).
        for (size_t k = 0; k < sizeof(T); ++k)
            _mm_prefetch(reinterpret_cast<const char*>(x + i) + kPrefetchAhead + 64 * k, _MM_HINT_T0);
        a0 = _mm512_fmadd_ps(Fmt::load(x + i), Fmt::load(y + i), a0);
        a1 = _mm512_fmadd_ps(Fmt::load(x + i + 16), Fmt::load(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(Fmt::load(x + i + 32), Fmt::load(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(Fmt::load(x + i + 48), Fmt::load(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_fmadd_ps(Fmt::load(x + i), Fmt::load(y + i), a0);
    if (i < n) {
        const __mmask16 m = __mmask16((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(Fmt::load_tail(x + i, m), Fmt::load_tail(y + i, m), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

}  // namespace

float dot_f32(int64_t n, const void* w, const void* act) {
    return dot<F32>(n, static_cast<const float*>(w), static_cast<const float*>(act));
}
float dot_f16(int64_t n, const void* w, const void* act) {
    return dot<F16>(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(act));
}
float dot_bf16(int64_t n, const void* w, const void* act) {
    return dot<BF16>(n, static_cast<const uint16_t*>(w), static_cast<const uint16_t*>(act));
}

}  // namespace ds4::quant::avx512
