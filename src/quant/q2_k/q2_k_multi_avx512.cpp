// Multi-row Q2_K x Q8_K dots, AVX-512 VNNI: q2_k_avx512.cpp's arithmetic per activation row
// (64 codes per vpsrlvw of a broadcast 32-byte load, each 4-value i32 lane times its group
// scale, the min term from the activation's bsums, the same float operations in the same
// order). Per block and tile of activation rows (packed, activation/q8_k_pack_avx512.h), the codes are
// multiplied by their group scale once (code <= 3 times scale <= 15 fits a byte: one
// vpmullw on byte pairs, which share their group), so that one vpdpbusd per 64 values and
// row gives the one-row kernel's lane (which looks the products up with vpshufb instead):
// the same integers, so the same bits. The scales come as
// vectors and the min terms of two rows share one 512-bit vpmaddwd / convert / FMA (8
// tokens, 2048 columns, weights in L2: 174 -> 220 GMAC/s).
#include "quant/x86_simd.h"  // first: see there

#include <vector>

#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q2_k/q2_k.h"
#include "quant/activation/q8_k_pack_avx512.h"

namespace ds4::quant {
namespace {

// Per block and tile, beside the packed codes: every row's d as a 16-lane vector, and the
// bsums and d of token pairs (t, t+1) side by side, so that one 512-bit vpmaddwd, convert,
// multiply and FMA make the min terms of two tokens (each in its own 256-bit half, the lanes
// of the one-row kernel's 256-bit accumulator).
struct PairExtras {
    std::vector<Q8KLine> dvec;   // [nb][T]: d of row t in every lane
    std::vector<Q8KLine> bsum2;  // [nb][pairs]: bsums of rows 2p, 2p+1 (i16 x 16 each)
    std::vector<Q8KLine> dpair;  // [nb][pairs]: d of row 2p in lanes 0-7, of 2p+1 in 8-15

    void pack(const void* const* act, int T, int64_t nb) {
        const int P = (T + 1) / 2;
        if (dvec.size() < size_t(nb * T)) dvec.resize(size_t(nb * T));
        if (bsum2.size() < size_t(nb * P)) bsum2.resize(size_t(nb * P));
        if (dpair.size() < size_t(nb * P)) dpair.resize(size_t(nb * P));
        for (int64_t b = 0; b < nb; ++b)
            for (int p = 0; p < P; ++p) {
                const auto* a0 = static_cast<const BlockQ8_K*>(act[2 * p]) + b;
                const auto* a1 = 2 * p + 1 < T ? static_cast<const BlockQ8_K*>(act[2 * p + 1]) + b : nullptr;
                const __m256i bs0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a0->bsums));
                const __m256i bs1 = a1 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a1->bsums))
                                       : _mm256_setzero_si256();
                _mm512_store_si512(bsum2[size_t(b * P + p)].b,
                                   _mm512_inserti64x4(_mm512_castsi256_si512(bs0), bs1, 1));
                const __m512 d0 = _mm512_set1_ps(a0->d), d1 = _mm512_set1_ps(a1 ? a1->d : 0.0f);
                _mm512_store_ps(dpair[size_t(b * P + p)].b, _mm512_mask_blend_ps(__mmask16(0xff00), d0, d1));
                _mm512_store_ps(dvec[size_t(b * T + 2 * p)].b, d0);
                if (a1) _mm512_store_ps(dvec[size_t(b * T + 2 * p + 1)].b, d1);
            }
    }
};

struct Kernel {
    int64_t nb;
    Q8KTile& act;
    PairExtras& extras;
    __m512i spread[4];

    void pack(const void* const* a, int T) {
        act.pack(a, T, nb);
        extras.pack(a, T, nb);
    }

    template <int T>
    void tile(const uint8_t* wp, float* out) const {
        constexpr int P = (T + 1) / 2;
        const auto* x = reinterpret_cast<const BlockQ2_K*>(wp);
        const __m512i m3 = _mm512_set1_epi8(3);
        const __m128i m15 = _mm_set1_epi8(15);
        const __m512i shift01 =
            _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
        const __m512i shift23 =
            _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
        __m512 acc[T], acc_min[P];
        for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
        for (int p = 0; p < P; ++p) acc_min[p] = _mm512_setzero_ps();
        const int8_t* q8 = act.qs;
        const Q8KLine* dvec = extras.dvec.data();
        const Q8KLine* bsum2 = extras.bsum2.data();
        const Q8KLine* dpair = extras.dpair.data();
        for (int64_t b = 0; b < nb; ++b, dvec += T, bsum2 += P, dpair += P) {
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
                        isum[t] = _mm512_dpbusd_epi32(isum[t], w, _mm512_load_si512(q8 + t * 64));
                }
            }
            // The block's 16 mins, as i16, in both 256-bit halves.
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m15));
            const __m512i mins2 = _mm512_inserti64x4(_mm512_castsi256_si512(mins), mins, 1);
            const __m512 xd = _mm512_set1_ps(_cvtsh_ss(x[b].d)), xdmin = _mm512_set1_ps(_cvtsh_ss(x[b].dmin));
            for (int t = 0; t < T; ++t)
                acc[t] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps(dvec[t].b), xd),
                                         _mm512_cvtepi32_ps(isum[t]), acc[t]);
            for (int p = 0; p < P; ++p) {
                const __m512i msum = _mm512_madd_epi16(mins2, _mm512_load_si512(bsum2[p].b));
                acc_min[p] = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_load_ps(dpair[p].b), xdmin),
                                             _mm512_cvtepi32_ps(msum), acc_min[p]);
            }
        }
        for (int t = 0; t < T; ++t) {
            const __m256 m = t % 2 ? _mm512_extractf32x8_ps(acc_min[t / 2], 1)
                                   : _mm512_castps512_ps256(acc_min[t / 2]);
            out[t] = _mm512_reduce_add_ps(acc[t]) - hsum_ps(m);
        }
    }
};

}  // namespace

void multi_q2_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y) {
    if (n_act == 1) return q2_k_rows_avx512(n, W, w_stride, rows, act[0], y[0]);
    thread_local Q8KTile tile;
    thread_local PairExtras extras;
    Kernel k{n / kQK_K, tile, extras, {}};
    for (int i = 0; i < 4; ++i) {
        alignas(64) int8_t ctl[64];
        for (int j = 0; j < 64; ++j) ctl[j] = int8_t(j % 2 ? 0x80 : 4 * i + j / 16);
        k.spread[i] = _mm512_load_si512(ctl);
    }
    run_packed_tiles<8>(k, W, w_stride, rows, act, n_act, y);
}

}  // namespace ds4::quant
