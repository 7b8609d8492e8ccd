// Q4_0 x Q8_0 dots, AVX2, for any number of weight rows and activation rows (q4_0.h's
// arithmetic): a block's 32 codes in one register (low nibbles are values 0..15, high nibbles
// 16..31), minus 8; vpmaddubsw of |code| with the activation carrying the code's sign (at most
// 2 * 8 * 127 per pair), vpmaddwd with ones gives lane k's four products; one fma per block
// into the even or odd blocks' accumulator. The codes are made once per tile of activations.
#include "quant/x86_simd.h"  // first: see there

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q4_0/q4_0.h"

namespace ds4::quant {
namespace {

struct Kernel {
    int64_t nb;
    const BlockQ8_0* const* act;

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ4_0*>(wp);
        const BlockQ8_0* a[T];
        for (int t = 0; t < T; ++t) a[t] = act[t0 + t];
        const __m128i m15 = _mm_set1_epi8(15);
        const __m256i eight = _mm256_set1_epi8(8), ones = _mm256_set1_epi16(1);
        __m256 acc[T][2];
        for (int t = 0; t < T; ++t) acc[t][0] = acc[t][1] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            const __m128i bits = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].qs));
            const __m256i codes = _mm256_sub_epi8(
                _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bits, 4), m15), _mm_and_si128(bits, m15)), eight);
            const __m256i mag = _mm256_sign_epi8(codes, codes);
            const float xd = _cvtsh_ss(x[b].d);
            for (int t = 0; t < T; ++t) {
                const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs));
                const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sign_epi8(q, codes)), ones);
                const __m256 d = _mm256_set1_ps(xd * _cvtsh_ss(a[t][b].d));
                acc[t][b & 1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), d, acc[t][b & 1]);
            }
        }
        for (int t = 0; t < T; ++t) out[t] = hsum_ps(_mm256_add_ps(acc[t][0], acc[t][1]));
    }
};

}  // namespace

void multi_q4_0_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y) {
    const Kernel k{n / kQK4_0, reinterpret_cast<const BlockQ8_0* const*>(act)};
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
