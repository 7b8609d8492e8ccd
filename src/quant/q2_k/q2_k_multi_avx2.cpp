// Multi-row Q2_K x Q8_K dots, AVX2: q2_k_avx2.cpp's arithmetic per activation row (32 codes per
// shift of a 32-byte load, vpmaddubsw, vpmaddwd with the spread group scales, the min term
// from the bsums), with the codes and spread scales made once per tile.
#include "quant/x86_simd.h"  // first: see there

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q2_k/q2_k.h"

namespace ds4::quant {
namespace {

struct Kernel {
    int64_t nb;
    const BlockQ8_K* const* act;
    __m256i spread[8];

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ2_K*>(wp);
        const BlockQ8_K* a[T];
        for (int t = 0; t < T; ++t) a[t] = act[t0 + t];
        const __m256i m3 = _mm256_set1_epi8(3);
        const __m128i m15 = _mm_set1_epi8(15);
        __m256 acc[T], acc_min[T];
        for (int t = 0; t < T; ++t) acc[t] = acc_min[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
            const __m256i scales = _mm256_broadcastsi128_si256(_mm_and_si128(sm, m15));
            __m256i isum[T];
            for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
            for (int half = 0; half < 2; ++half) {
                const __m256i bits =
                    _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * half));
                for (int j = 0; j < 4; ++j) {
                    const __m256i codes = _mm256_and_si256(_mm256_srli_epi16(bits, 2 * j), m3);
                    const __m256i s = _mm256_shuffle_epi8(scales, spread[4 * half + j]);
                    for (int t = 0; t < T; ++t) {
                        const __m256i q = _mm256_loadu_si256(
                            reinterpret_cast<const __m256i*>(a[t][b].qs + 128 * half + 32 * j));
                        isum[t] = _mm256_add_epi32(
                            isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(codes, q), s));
                    }
                }
            }
            const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), m15));
            const float xd = _cvtsh_ss(x[b].d), xdmin = _cvtsh_ss(x[b].dmin);
            for (int t = 0; t < T; ++t) {
                const __m256i msum = _mm256_madd_epi16(
                    mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].bsums)));
                const float d = a[t][b].d * xd, dmin = a[t][b].d * xdmin;
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(isum[t]), acc[t]);
                acc_min[t] = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum),
                                             acc_min[t]);
            }
        }
        for (int t = 0; t < T; ++t) out[t] = hsum_ps(acc[t]) - hsum_ps(acc_min[t]);
    }
};

}  // namespace

void multi_q2_k_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y) {
    if (n_act == 1) {  // decode: the one-row dot is the faster way here
        const auto* base = static_cast<const uint8_t*>(W);
        for (int64_t r = 0; r < rows; ++r) y[0][r] = dot_q2_k_q8_k_avx2(n, base + size_t(r) * w_stride, act[0]);
        return;
    }
    Kernel k{n / kQK_K, reinterpret_cast<const BlockQ8_K* const*>(act), {}};
    // For sub-block k (groups 2k, 2k+1): low lane words = scale byte 2k, high lane words =
    // scale byte 2k+1 (index 0x80 zeroes the upper byte of each word).
    for (int i = 0; i < 8; ++i) {
        alignas(32) int8_t ctl[32];
        for (int j = 0; j < 32; ++j) ctl[j] = int8_t(j % 2 ? 0x80 : 2 * i + j / 16);
        k.spread[i] = _mm256_load_si256(reinterpret_cast<const __m256i*>(ctl));
    }
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
