// Multi-row Q8_0 x Q8_0 dots, AVX2: q8_0_avx2.cpp's arithmetic per activation row (two
// accumulators over alternating blocks, |w| * a*sign(w) with vpmaddubsw and vpmaddwd, one FMA
// per block with d_w * d_a), with |w| and the weight scale made once per tile. The
// activations' f16 scales are converted once per call (exactly).
#include "quant/x86_simd.h"  // first: see there

#include <vector>

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"

namespace ds4::quant {
namespace {

struct Kernel {
    int64_t nb;
    const BlockQ8_0* const* act;
    const float* ascale;  // [n_act][nb]

    template <int T>
    static void block(const BlockQ8_0& x, const BlockQ8_0* const* y, const float* const* ys,
                      int64_t b, __m256* acc) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
        const __m256i wabs = _mm256_sign_epi8(w, w);
        const float wd = _cvtsh_ss(x.d);
        for (int t = 0; t < T; ++t) {
            const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(y[t][b].qs));
            const __m256i p16 = _mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, w));
            const __m256 p = _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
            acc[t] = _mm256_fmadd_ps(_mm256_set1_ps(wd * ys[t][b]), p, acc[t]);
        }
    }

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ8_0*>(wp);
        const BlockQ8_0* y[T];
        const float* ys[T];
        for (int t = 0; t < T; ++t) {
            y[t] = act[t0 + t];
            ys[t] = ascale + (t0 + t) * nb;
        }
        __m256 acc0[T], acc1[T];
        for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm256_setzero_ps();
        int64_t b = 0;
        for (; b + 2 <= nb; b += 2) {
            block<T>(x[b], y, ys, b, acc0);
            block<T>(x[b + 1], y, ys, b + 1, acc1);
        }
        if (b < nb) block<T>(x[b], y, ys, b, acc0);
        for (int t = 0; t < T; ++t) out[t] = hsum_ps(_mm256_add_ps(acc0[t], acc1[t]));
    }
};

}  // namespace

void multi_q8_0_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y) {
    const int64_t nb = n / kQK8_0;
    thread_local std::vector<float> ascale;
    ascale.resize(size_t(n_act * nb));
    for (int64_t t = 0; t < n_act; ++t) {
        const auto* a = static_cast<const BlockQ8_0*>(act[t]);
        for (int64_t b = 0; b < nb; ++b) ascale[size_t(t * nb + b)] = _cvtsh_ss(a[b].d);
    }
    const Kernel k{nb, reinterpret_cast<const BlockQ8_0* const*>(act), ascale.data()};
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
