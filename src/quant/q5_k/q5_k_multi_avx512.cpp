// Q5_K x Q8_K dots, AVX-512 VNNI, for any number of weight rows and activation rows: Q4_K's
// arithmetic (q4_k_avx512.cpp) with a fifth code bit. A 32-byte code load broadcast to both
// halves and shifted by 0 / 4 bits gives the 64 codes of sub-blocks 2c and 2c+1; the 32 qh
// bytes, broadcast the same way and shifted by 2c / 2c+1, give their high bits (bit 0 of each
// byte, which no bit of the neighbouring byte reaches in 7 shifts), moved to bit 4.
// vpmaddubsw and vpdpwssd with the two sub-block scales; the min term from the bsums. Codes
// and scales are made once per tile of activations.
#include "quant/x86_simd.h"  // first: see there

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q4_k/q4_k_scales.h"
#include "quant/q5_k/q5_k.h"

namespace ds4::quant {
namespace {

// Low 256 bits: words all a; high 256 bits: words all b.
inline __m512i halves_epi16(int a, int b) {
    return _mm512_inserti64x4(_mm512_set1_epi16(int16_t(a)), _mm256_set1_epi16(int16_t(b)), 1);
}

struct Kernel {
    int64_t nb;
    const BlockQ8_K* const* act;
    __m512i spread[4];  // low half: words of scale byte 2c; high half: byte 2c+1
    __m512i hshift[4];  // qh shift for sub-blocks 2c / 2c+1

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ5_K*>(wp);
        const BlockQ8_K* a[T];
        for (int t = 0; t < T; ++t) a[t] = act[t0 + t];
        const __m512i m15 = _mm512_set1_epi8(15), one = _mm512_set1_epi8(1);
        const __m512i nshift = halves_epi16(0, 4);
        __m512 acc[T];
        __m256 acc_min[T];
        for (int t = 0; t < T; ++t) {
            acc[t] = _mm512_setzero_ps();
            acc_min[t] = _mm256_setzero_ps();
        }
        for (int64_t b = 0; b < nb; ++b) {
            const Q4KScales s = q4_k_unpack_scales(x[b].scales);
            const __m512i scales = _mm512_broadcast_i32x4(_mm_cvtsi64_si128(int64_t(s.sc)));
            const __m512i high = _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qh)));
            __m512i isum[T];
            for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
            for (int c = 0; c < 4; ++c) {
                const __m512i bits = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * c)));
                const __m512i hb = _mm512_and_si512(_mm512_srlv_epi16(high, hshift[c]), one);
                const __m512i codes = _mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi16(bits, nshift), m15),
                                                      _mm512_slli_epi16(hb, 4));
                const __m512i sc = _mm512_shuffle_epi8(scales, spread[c]);
                for (int t = 0; t < T; ++t)
                    isum[t] = _mm512_dpwssd_epi32(isum[t], _mm512_maddubs_epi16(codes, _mm512_loadu_si512(a[t][b].qs + 64 * c)), sc);
            }
            const __m128i mn8 = _mm_cvtsi64_si128(int64_t(s.mn));
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
            const float xd = _cvtsh_ss(x[b].d), xdmin = _cvtsh_ss(x[b].dmin);
            for (int t = 0; t < T; ++t) {
                const __m256i msum = _mm256_madd_epi16(mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums)));
                const float d = a[t][b].d * xd, dmin = a[t][b].d * xdmin;
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(isum[t]), acc[t]);
                acc_min[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum), acc_min[t]);
            }
        }
        for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(acc[t]) - hsum_ps(acc_min[t]);
    }
};

}  // namespace

void multi_q5_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y) {
    Kernel k{n / kQK_K, reinterpret_cast<const BlockQ8_K* const*>(act), {}, {}};
    for (int c = 0; c < 4; ++c) {
        k.spread[c] = halves_epi16(0x8000 | (2 * c), 0x8000 | (2 * c + 1));
        k.hshift[c] = halves_epi16(2 * c, 2 * c + 1);
    }
    run_tiles<8>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
