// Multi-row Q4_K x Q8_K dots, AVX-512 VNNI: q4_k_avx512.cpp's arithmetic per activation row
// (a broadcast 32-byte load shifted by 0 / 4 gives 64 codes, vpmaddubsw, vpdpwssd with the two
// sub-block scales, the min term from the bsums, the same float operations in the same
// order), with the scale unpacking and the codes made once per block for a tile of
// activation rows (packed, activation/q8_k_pack_avx512.h).
#include "quant/x86_simd.h"  // first: see there

#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q4_k/q4_k.h"
#include "quant/q4_k/q4_k_scales.h"
#include "quant/activation/q8_k_pack_avx512.h"

namespace ds4::quant {
namespace {

struct Kernel {
    int64_t nb;
    Q8KTile& act;
    __m512i spread[4];

    void pack(const void* const* a, int T) { act.pack(a, T, nb); }

    template <int T>
    void tile(const uint8_t* wp, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ4_K*>(wp);
        const __m512i m15 = _mm512_set1_epi8(15);
        const __m512i shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
        __m512 acc[T];
        __m256 acc_min[T];
        for (int t = 0; t < T; ++t) {
            acc[t] = _mm512_setzero_ps();
            acc_min[t] = _mm256_setzero_ps();
        }
        const int8_t* q8 = act.qs;
        for (int64_t b = 0; b < nb; ++b) {
            const Q4KScales s = q4_k_unpack_scales(x[b].scales);
            const __m512i scales = _mm512_broadcast_i32x4(_mm_cvtsi64_si128(int64_t(s.sc)));
            __m512i isum[T];
            for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
            for (int c = 0; c < 4; ++c, q8 += T * 64) {
                const __m512i bits = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * c)));
                const __m512i codes = _mm512_and_si512(_mm512_srlv_epi16(bits, shift), m15);
                const __m512i sc = _mm512_shuffle_epi8(scales, spread[c]);
                for (int t = 0; t < T; ++t)
                    isum[t] = _mm512_dpwssd_epi32(
                        isum[t], _mm512_maddubs_epi16(codes, _mm512_loadu_si512(q8 + t * 64)), sc);
            }
            const __m128i mn8 = _mm_cvtsi64_si128(int64_t(s.mn));
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mn8, mn8));
            const float xd = _cvtsh_ss(x[b].d), xdmin = _cvtsh_ss(x[b].dmin);
            const float* ad = act.d.data() + b * T;
            const int16_t* bs = act.bsums.data() + b * T * 16;
            for (int t = 0; t < T; ++t) {
                const __m256i msum = _mm256_madd_epi16(
                    mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bs + t * 16)));
                const float d = ad[t] * xd, dmin = ad[t] * xdmin;
                acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(isum[t]), acc[t]);
                acc_min[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum),
                                             acc_min[t]);
            }
        }
        for (int t = 0; t < T; ++t)
            out[t] = _mm512_reduce_add_ps(acc[t]) - hsum_ps(acc_min[t]);
    }
};

}  // namespace

void multi_q4_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y) {
    thread_local Q8KTile tile;
    Kernel k{n / kQK_K, tile, {}};
    for (int c = 0; c < 4; ++c)
        k.spread[c] = _mm512_inserti64x4(_mm512_set1_epi16(int16_t(0x8000 | (2 * c))),
                                         _mm256_set1_epi16(int16_t(0x8000 | (2 * c + 1))), 1);
    run_packed_tiles<8>(k, W, w_stride, rows, act, n_act, y);
}

}  // namespace ds4::quant
