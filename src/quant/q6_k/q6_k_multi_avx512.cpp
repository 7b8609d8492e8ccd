// Q6_K x Q8_K dots, AVX-512 VNNI, for any number of weight rows and activation rows. Per half
// of a block (128 values) the 64 ql bytes are one load: their low nibbles are values 0..63 of
// the half and their high nibbles values 64..127 (q6_k.h), each with 2 high bits from the qh
// bytes broadcast to both 256-bit halves and shifted by 0 / 2 (4 / 6). vpmaddubsw (unsigned
// codes 0..63 x s8) and vpdpwssd with each 128-bit lane's 16-value scale; the -32 offset once
// per block as 32 * sum_g sc_g * bsum_g, taken off the integer sums. One fma per block. Codes
// and scales are made once per tile of activations.
#include "quant/x86_simd.h"  // first: see there

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q6_k/q6_k.h"

namespace ds4::quant {
namespace {

inline __m512i halves_epi16(int a, int b) {
    return _mm512_inserti64x4(_mm512_set1_epi16(int16_t(a)), _mm256_set1_epi16(int16_t(b)), 1);
}

struct Kernel {
    int64_t nb;
    const BlockQ8_K* const* act;
    __m512i group[4];  // word index vectors: 128-bit lane L -> scale word 4k + L

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ6_K*>(wp);
        const BlockQ8_K* a[T];
        for (int t = 0; t < T; ++t) a[t] = act[t0 + t];
        const __m512i m15 = _mm512_set1_epi8(15), m3 = _mm512_set1_epi8(3);
        const __m512i shift_lo = halves_epi16(0, 2), shift_hi = halves_epi16(4, 6);
        __m512 acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales)));
            const __m512i sc = _mm512_castsi256_si512(sc16);
            __m512i isum[T];
            for (int t = 0; t < T; ++t)  // -32 * sum_g sc_g * bsum_g, in lanes 0-7
                isum[t] = _mm512_zextsi256_si512(_mm256_slli_epi32(
                    _mm256_sub_epi32(_mm256_setzero_si256(),
                                     _mm256_madd_epi16(sc16, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums)))), 5));
            for (int h = 0; h < 2; ++h) {
                const __m512i ql = _mm512_loadu_si512(x[b].ql + 64 * h);
                const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh + 32 * h)));
                __m512i codes[2];
                codes[0] = _mm512_or_si512(_mm512_and_si512(ql, m15),
                                           _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_lo), m3), 4));
                codes[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m15),
                                           _mm512_slli_epi16(_mm512_and_si512(_mm512_srlv_epi16(qh, shift_hi), m3), 4));
                for (int k = 0; k < 2; ++k) {
                    const __m512i s = _mm512_permutexvar_epi16(group[2 * h + k], sc);
                    for (int t = 0; t < T; ++t)
                        isum[t] = _mm512_dpwssd_epi32(
                            isum[t], _mm512_maddubs_epi16(codes[k], _mm512_loadu_si512(a[t][b].qs + 128 * h + 64 * k)), s);
                }
            }
            const float xd = _cvtsh_ss(x[b].d);
            for (int t = 0; t < T; ++t)
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(a[t][b].d * xd), _mm512_cvtepi32_ps(isum[t]), acc[t]);
        }
        for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]);
    }
};

}  // namespace

void multi_q6_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y) {
    Kernel k{n / kQK_K, reinterpret_cast<const BlockQ8_K* const*>(act), {}};
    for (int j = 0; j < 4; ++j) {
        alignas(64) int16_t idx[32];
        for (int w = 0; w < 32; ++w) idx[w] = int16_t(4 * j + w / 8);
        k.group[j] = _mm512_load_si512(idx);
    }
    run_tiles<8>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
