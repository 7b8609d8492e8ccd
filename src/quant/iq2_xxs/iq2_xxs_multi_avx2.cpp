// Multi-row IQ2_XXS x Q8_K dots, AVX2: iq2_xxs_avx2.cpp's arithmetic per activation row (per 32
// values: codebook magnitudes, a negate mask applied to the activations, vpmaddubsw and
// vpmaddwd with 2l+1), with the codebook and sign-table loads done once per tile.
#include "quant/x86_simd.h"  // first: see there

#include <cstring>

#include "quant/iq2_xxs/iq2_xxs.h"
#include "quant/iq2_xxs/iq2_xxs_grid.h"
#include "quant/iq2_xxs/iq2_xxs_simd.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"

namespace ds4::quant {
namespace {

struct Kernel {
    int64_t nb;
    const BlockQ8_K* const* act;

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockIQ2_XXS*>(wp);
        const BlockQ8_K* a[T];
        for (int t = 0; t < T; ++t) a[t] = act[t0 + t];
        const uint64_t* grid = kIq2xxsGrid;
        const uint64_t* sign = kIq2xxsSignBytes.data();
        __m256 acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; ++b) {
            __m256i isum[T];
            for (int t = 0; t < T; ++t) isum[t] = _mm256_setzero_si256();
            for (int g = 0; g < 8; ++g) {
                uint32_t idx, aux;
                std::memcpy(&idx, x[b].qs + 4 * g, 4);
                std::memcpy(&aux, x[b].qs + 4 * g + 2, 4);
                const __m256i mag = _mm256_set_epi64x(
                    int64_t(grid[idx >> 24]), int64_t(grid[(idx >> 16) & 255]),
                    int64_t(grid[(idx >> 8) & 255]), int64_t(grid[idx & 255]));
                const __m256i neg = _mm256_set_epi64x(
                    int64_t(sign[(aux >> 21) & 127]), int64_t(sign[(aux >> 14) & 127]),
                    int64_t(sign[(aux >> 7) & 127]), int64_t(sign[aux & 127]));
                const __m256i scale = _mm256_set1_epi16(int16_t(2 * (aux >> 28) + 1));
                for (int t = 0; t < T; ++t) {
                    const __m256i q =
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[t][b].qs + 32 * g));
                    const __m256i qs = _mm256_sub_epi8(_mm256_xor_si256(q, neg), neg);
                    isum[t] = _mm256_add_epi32(
                        isum[t], _mm256_madd_epi16(_mm256_maddubs_epi16(mag, qs), scale));
                }
            }
            const float xd = f16c_to_f32(x[b].d);
            for (int t = 0; t < T; ++t)
                acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(a[t][b].d * xd),
                                         _mm256_cvtepi32_ps(isum[t]), acc[t]);
        }
        for (int t = 0; t < T; ++t) out[t] = 0.125f * hsum_ps(acc[t]);
    }
};

}  // namespace

void multi_iq2_xxs_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                        const void* const* act, int64_t n_act, float* const* y) {
    const Kernel k{n / kQK_K, reinterpret_cast<const BlockQ8_K* const*>(act)};
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
