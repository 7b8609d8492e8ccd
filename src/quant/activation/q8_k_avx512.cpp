// AVX-512 versions of the activation quantizers (q8_k.cpp holds the references and explains
// the conventions). Same bits for every input:
// - the largest |x| is a lane-wise max_ps(|x|, acc), which keeps acc when x is NaN, as the
//   reference's comparisons skip NaNs;
// - codes round with cvtps2dq (nearest, ties to even: the default MXCSR mode, which the
//   reference's 1.5 * 2^23 trick also relies on); a NaN product gives 0x80000000 in both, and
//   both keep its low byte (0);
// - Q8_K's sign comes from the first lane, in index order, that holds the largest |x|.
// These ran serially on the calling thread before every batched product, ~3% of a prefill.
#include "quant/x86_simd.h"  // first: see there

#include <cstring>

#include "quant/blocks.h"
#include "quant/activation/activation.h"

namespace ds4::quant::avx512 {
namespace {

inline __m512 abs_ps(__m512 x) { return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_set1_epi32(int32_t(0x80000000u)), _mm512_castps_si512(x))); }

}  // namespace

void quantize_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
    for (int64_t b = 0; b < n / kQK8_0; ++b) {
        const float* x = src + b * kQK8_0;
        const __m512 x0 = _mm512_loadu_ps(x), x1 = _mm512_loadu_ps(x + 16);
        const __m512 m = _mm512_max_ps(abs_ps(x1), _mm512_max_ps(abs_ps(x0), _mm512_setzero_ps()));
        const float amax = _mm512_reduce_max_ps(m);
        dst[b].d = _cvtss_sh(amax / 127.0f, _MM_FROUND_TO_NEAREST_INT);
        const __m512 id = _mm512_set1_ps(amax != 0.0f ? 127.0f / amax : 0.0f);
        const __m128i q0 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x0, id)));
        const __m128i q1 = _mm512_cvtepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(x1, id)));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst[b].qs), q0);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(dst[b].qs + 16), q1);
    }
}

void quantize_q8_k(const float* src, BlockQ8_K* dst, int64_t n) {
    constexpr int kVecs = kQK_K / 16;
    for (int64_t b = 0; b < n / kQK_K; ++b) {
        const float* x = src + b * kQK_K;
        BlockQ8_K& y = dst[b];
        __m512 m = _mm512_setzero_ps();
        for (int v = 0; v < kVecs; ++v) m = _mm512_max_ps(abs_ps(_mm512_loadu_ps(x + 16 * v)), m);
        const float amax = _mm512_reduce_max_ps(m);
        if (amax == 0.0f) {
            std::memset(&y, 0, sizeof y);
            continue;
        }
        // The first value whose |x| is amax (there is one: amax is not NaN, and is one of them).
        const __m512 va = _mm512_set1_ps(amax);
        float max = 0.0f;
        for (int v = 0; v < kVecs; ++v) {
            const __mmask16 hit = _mm512_cmp_ps_mask(abs_ps(_mm512_loadu_ps(x + 16 * v)), va, _CMP_EQ_OQ);
            if (hit) {
                max = x[16 * v + __builtin_ctz(hit)];
                break;
            }
        }
        const float iscale = -127.0f / max;
        const __m512 vs = _mm512_set1_ps(iscale);
        const __m512i top = _mm512_set1_epi32(127);
        for (int v = 0; v < kVecs; ++v) {
            const __m512i q = _mm512_min_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(vs, _mm512_loadu_ps(x + 16 * v))), top);
            _mm_storeu_si128(reinterpret_cast<__m128i*>(y.qs + 16 * v), _mm512_cvtepi32_epi8(q));
            // The reference sums the stored int8 codes: a NaN's 0x80000000 counts as 0.
            y.bsums[v] = int16_t(_mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(_mm512_cvtepi32_epi8(q))));
        }
        y.d = 1.0f / iscale;
    }
}

}  // namespace ds4::quant::avx512
