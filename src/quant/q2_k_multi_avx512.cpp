// Multi-row Q2_K x Q8_K dots, AVX-512 VNNI: q2_k_avx512.cpp's arithmetic per activation row
// (64 codes per vpsrlvw of a broadcast 32-byte load, each 4-value i32 lane times its group
// scale, the min term from the activation's bsums, the same float operations in the same
// order). Per block and tile of activation rows (packed, q8_k_pack_avx512.h), the codes are
// multiplied by their group scale once (code <= 3 times scale <= 15 fits a byte: one
// vpmullw on byte pairs, which share their group), so that one vpdpbusd per 64 values and
// row gives the lane that vpmaddubsw + vpdpwssd with the scales give in the one-row kernel:
// the same integers, so the same bits, with half the multiplies per row (8 tokens, 2048
// columns, weights in L2: 111 -> 116-121 GMAC/s, 48 tokens 110 -> 113-118).
#include "quant/x86_simd.h"  // first: see there

#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q8_k_pack_avx512.h"

namespace ds4::quant {
namespace {

struct Kernel {
    int64_t nb;
    Q8KTile& act;
    __m512i spread[4];

    void pack(const void* const* a, int T) { act.pack(a, T, nb); }

    template <int T>
    void tile(const uint8_t* wp, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ2_K*>(wp);
        const __m512i m3 = _mm512_set1_epi8(3);
        const __m128i m15 = _mm_set1_epi8(15);
        const __m512i shift01 =
            _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
        const __m512i shift23 =
            _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
        __m512 acc[T];
        __m256 acc_min[T];
        for (int t = 0; t < T; ++t) {
            acc[t] = _mm512_setzero_ps();
            acc_min[t] = _mm256_setzero_ps();
        }
        const int8_t* q8 = act.qs.data();
        for (int64_t b = 0; b < nb; ++b) {
            const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
            const __m512i scales = _mm512_broadcast_i32x4(_mm_and_si128(sm, m15));
            __m512i isum[T];
            for (int t = 0; t < T; ++t) isum[t] = _mm512_setzero_si512();
            for (int half = 0; half < 2; ++half) {
                const __m512i bits = _mm512_broadcast_i64x4(
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * half)));
                for (int k = 0; k < 2; ++k, q8 += T * 64) {
                    const __m512i codes =
                        _mm512_and_si512(_mm512_srlv_epi16(bits, k ? shift23 : shift01), m3);
                    const __m512i w = _mm512_mullo_epi16(
                        codes, _mm512_shuffle_epi8(scales, spread[2 * half + k]));
                    for (int t = 0; t < T; ++t)
                        isum[t] = _mm512_dpbusd_epi32(isum[t], w, _mm512_loadu_si512(q8 + t * 64));
                }
            }
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m15));
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

void multi_q2_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y) {
    thread_local Q8KTile tile;
    Kernel k{n / kQK_K, tile, {}};
    for (int i = 0; i < 4; ++i) {
        alignas(64) int8_t ctl[64];
        for (int j = 0; j < 64; ++j) ctl[j] = int8_t(j % 2 ? 0x80 : 4 * i + j / 16);
        k.spread[i] = _mm512_load_si512(ctl);
    }
    run_packed_tiles<8>(k, W, w_stride, rows, act, n_act, y);
}

}  // namespace ds4::quant
