// Q6_K x Q8_K dots, AVX2, for any number of weight rows and activation rows. Per half of a
// block (128 values): two 32-byte ql loads and one qh load give four registers of 32 unsigned
// 6-bit codes in value order (q6_k.h); vpmaddubsw with the activation (pairs at most
// 2*63*127), vpmaddwd with the two 16-value scales of the register (sign-extended words), and
// the -32 offset once per block as 32 * sum_g sc_g * bsum_g. One fma per block. Codes and
// scales are made once per tile of activations.
#include "quant/x86_simd.h"  // first: see there

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q6_k/q6_k.h"

namespace ds4::quant {
namespace {

struct Kernel {
    int64_t nb;
    const BlockQ8_K* const* act;

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ6_K*>(wp);
        const BlockQ8_K* a[T];
        for (int t = 0; t < T; ++t) a[t] = act[t0 + t];
        const __m256i m15 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
        __m256 acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const __m128i sc8 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
            const __m256i sc16 = _mm256_cvtepi8_epi16(sc8);
            __m256i isum[T];
            for (int t = 0; t < T; ++t)  // -32 * sum_g sc_g * bsum_g, in 8 lanes
                isum[t] = _mm256_slli_epi32(
                    _mm256_sub_epi32(_mm256_setzero_si256(),
                                     _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums)))), 5);
            for (int h = 0; h < 2; ++h) {
                const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].ql + 64 * h));
                const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].ql + 64 * h + 32));
                const __m256i qh = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh + 32 * h));
                __m256i codes[4];
                codes[0] = _mm256_or_si256(_mm256_and_si256(l0, m15), _mm256_slli_epi16(_mm256_and_si256(qh, m3), 4));
                codes[1] = _mm256_or_si256(_mm256_and_si256(l1, m15),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 2), m3), 4));
                codes[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m15),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 4), m3), 4));
                codes[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m15),
                                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(qh, 6), m3), 4));
                for (int s = 0; s < 4; ++s) {
                    // words 0-7: scale of group 8h + 2s, words 8-15: of group 8h + 2s + 1
                    const int g = 8 * h + 2 * s;
                    const __m256i sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(
                        sc8, _mm_set_epi64x(0x0101010101010101 * (g + 1), 0x0101010101010101 * g)));
                    for (int t = 0; t < T; ++t) {
                        const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs + 128 * h + 32 * s));
                        isum[t] = _mm256_add_epi32(isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(codes[s], q), sc));
                    }
                }
            }
            const float xd = _cvtsh_ss(x[b].d);
            for (int t = 0; t < T; ++t)
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(a[t][b].d * xd), _mm256_cvtepi32_ps(isum[t]), acc[t]);
        }
        for (int t = 0; t < T; ++t) out[t] = hsum_ps(acc[t]);
    }
};

}  // namespace

void multi_q6_k_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y) {
    const Kernel k{n / kQK_K, reinterpret_cast<const BlockQ8_K* const*>(act)};
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
