// Q5_K x Q8_K dots, AVX2, for any number of weight rows and activation rows: Q4_K's arithmetic
// (q4_k_multi_avx2.cpp) with a fifth code bit. Low and high nibbles of a 32-byte load are two
// sub-blocks; sub-block j's high bits are bit j of the 32 qh bytes (taken as bit 0 of a copy
// shifted right once per sub-block, which no bit of a neighbouring byte reaches in 7 shifts)
// moved to bit 4. vpmaddubsw (codes 0..31 x s8, pairs at most 2*31*127), vpmaddwd with the
// sub-block scale, the min term from the bsums. Codes and scales are made once per tile.
#include "quant/x86_simd.h"  // first: see there

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q4_k/q4_k_scales.h"
#include "quant/q5_k/q5_k.h"

namespace ds4::quant {
namespace {

struct Kernel {
    int64_t nb;
    const BlockQ8_K* const* act;

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ5_K*>(wp);
        const BlockQ8_K* a[T];
        for (int t = 0; t < T; ++t) a[t] = act[t0 + t];
        const __m256i m15 = _mm256_set1_epi8(15), one = _mm256_set1_epi8(1);
        __m256 acc[T], acc_min[T];
        for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const Q4KScales s = q4_k_unpack_scales(x[b].scales);
            const __m256i scales = _mm256_broadcastsi128_si256(_mm_cvtsi64_si128(int64_t(s.sc)));
            __m256i high = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh));
            __m256i isum[T];
            for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
            for (int c = 0; c < 4; ++c) {
                const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * c));
                const __m256i lo = _mm256_or_si256(_mm256_and_si256(bits, m15),
                                                   _mm256_slli_epi16(_mm256_and_si256(high, one), 4));
                high = _mm256_srli_epi16(high, 1);
                const __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(bits, 4), m15),
                                                   _mm256_slli_epi16(_mm256_and_si256(high, one), 4));
                high = _mm256_srli_epi16(high, 1);
                const __m256i slo = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(int16_t(0x8000 | (2 * c))));
                const __m256i shi = _mm256_shuffle_epi8(scales, _mm256_set1_epi16(int16_t(0x8000 | (2 * c + 1))));
                for (int t = 0; t < T; ++t) {
                    const int8_t* q8 = a[t][b].qs + 64 * c;
                    const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8)));
                    const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q8 + 32)));
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(plo, slo));
                    isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(phi, shi));
                }
            }
            const __m128i mn8 = _mm_cvtsi64_si128(int64_t(s.mn));
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
            const float xd = _cvtsh_ss(x[b].d), xdmin = _cvtsh_ss(x[b].dmin);
            for (int t = 0; t < T; ++t) {
                const __m256i msum = _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums)));
                const float d = a[t][b].d * xd, dmin = a[t][b].d * xdmin;
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
                acc_min[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum), acc_min[t]);
            }
        }
        for (int t = 0; t < T; ++t) out[t] = hsum_ps(acc[t]) - hsum_ps(acc_min[t]);
    }
};

}  // namespace

void multi_q5_k_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y) {
    const Kernel k{n / kQK_K, reinterpret_cast<const BlockQ8_K* const*>(act)};
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
