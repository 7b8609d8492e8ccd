// Q4_0 x Q8_0 dots, AVX-512 VNNI, for any number of weight rows and activation rows (q4_0.h's
// arithmetic): two blocks per register, the even block in lanes 0-7 and the odd one in lanes
// 8-15. The 64 codes stay unsigned (0..15): vpdpbusd of the codes with the activation minus
// vpdpbusd of 8 with it gives each lane's four products (q - 8) * a exactly. One fma per
// block pair; a last odd block updates lanes 0-7 only. The codes are made once per tile.
#include "quant/x86_simd.h"  // first: see there

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q4_0/q4_0.h"

namespace ds4::quant {
namespace {

// Blocks x[0] and (when two) x[1]: byte 32h + i of the result is value i of block h.
inline __m512i pair_codes(const BlockQ4_0* x, bool two) {
    const __m128i b0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[0].qs));
    const __m128i b1 = two ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[1].qs)) : _mm_setzero_si128();
    // 128-bit lanes: b0, b0 >> 4, b1, b1 >> 4 (as 16-bit shifts; the mask drops what crosses)
    const __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_set_m128i(b0, b0)), _mm256_set_m128i(b1, b1), 1);
    const __m512i shift = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0,
                                            0x0004000400040004, 0x0004000400040004);
    return _mm512_and_si512(_mm512_srlv_epi16(v, shift), _mm512_set1_epi8(15));
}

inline __m512i pair_act(const BlockQ8_0* a, bool two) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[0].qs));
    const __m256i hi = two ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[1].qs)) : _mm256_setzero_si256();
    return _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
}

struct Kernel {
    int64_t nb;
    const BlockQ8_0* const* act;

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ4_0*>(wp);
        const BlockQ8_0* a[T];
        for (int t = 0; t < T; ++t) a[t] = act[t0 + t];
        const __m512i eight = _mm512_set1_epi8(8), zero = _mm512_setzero_si512();
        __m512 acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t b = 0; b < nb; b += 2) {
            const bool two = b + 1 < nb;
            const __m512i codes = pair_codes(x + b, two);
            const float xd0 = _cvtsh_ss(x[b].d), xd1 = two ? _cvtsh_ss(x[b + 1].d) : 0.0f;
            const __mmask16 lanes = two ? 0xffff : 0x00ff;
            for (int t = 0; t < T; ++t) {
                const __m512i q = pair_act(a[t] + b, two);
                const __m512i p = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, codes, q), _mm512_dpbusd_epi32(zero, eight, q));
                const float d1 = two ? xd1 * _cvtsh_ss(a[t][b + 1].d) : 0.0f;
                const __m512 d = _mm512_insertf32x8(_mm512_set1_ps(xd0 * _cvtsh_ss(a[t][b].d)), _mm256_set1_ps(d1), 1);
                acc[t] = _mm512_mask3_fmadd_ps(_mm512_cvtepi32_ps(p), d, acc[t], lanes);
            }
        }
        for (int t = 0; t < T; ++t)
            out[t] = hsum_ps(_mm256_add_ps(_mm512_castps512_ps256(acc[t]), _mm512_extractf32x8_ps(acc[t], 1)));
    }
};

}  // namespace

void multi_q4_0_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y) {
    const Kernel k{n / kQK4_0, reinterpret_cast<const BlockQ8_0* const*>(act)};
    run_tiles<8>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
