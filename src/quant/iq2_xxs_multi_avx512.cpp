// Multi-row IQ2_XXS x Q8_K dots, AVX-512 VNNI: iq2_xxs_avx512.cpp's arithmetic per activation
// row (per block 16 i32 lanes of scale-weighted pair sums, one FMA with d_w * d_a, the same
// final sum), with the weight side of every block decoded once for a tile of up to 8
// activation rows, packed once per tile (iq2_xxs_step_avx512.h iq2xxs_tile).
#include "quant/x86_simd.h"  // first: see there

#include <vector>

#include "quant/iq2_xxs_step_avx512.h"
#include "quant/iq2_xxs_vbmi.h"
#include "quant/multi_dot.h"

namespace ds4::quant {

void multi_iq2_xxs_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                          const void* const* act, int64_t n_act, float* const* y) {
    constexpr int kTile = 8;
    const int64_t nb = n / kQK_K;
    thread_local std::vector<uint8_t> codes;
    thread_local std::vector<float> ad;
    if (codes.size() < size_t(nb * 4 * kTile * 64)) codes.resize(size_t(nb * 4 * kTile * 64));
    if (ad.size() < size_t(nb * kTile)) ad.resize(size_t(nb * kTile));
    static const Iq2xxsLookupDecoder lookup;
    const bool vbmi = iq2xxs_vbmi_active();
    const __m512i bias = _mm512_set1_epi8(char(0x80));
    for (int64_t t0 = 0; t0 < n_act; t0 += kTile) {
        const int m = int(n_act - t0 < kTile ? n_act - t0 : kTile);
        for (int t = 0; t < m; ++t) {
            const auto* a = static_cast<const BlockQ8_K*>(act[t0 + t]);
            for (int64_t b = 0; b < nb; ++b) {
                ad[size_t(b * m + t)] = a[b].d;
                for (int s = 0; s < 4; ++s)
                    _mm512_storeu_si512(&codes[size_t(((b * 4 + s) * m + t) * 64)],
                                        _mm512_xor_si512(_mm512_loadu_si512(a[b].qs + 64 * s), bias));
            }
        }
        const auto* base = static_cast<const uint8_t*>(W);
        if (vbmi)
            iq2xxs_rows_vbmi(nb, base, w_stride, rows, codes.data(), ad.data(), m, y + t0);
        else
            iq2xxs_rows<Iq2xxsLookupDecoder, kTile>(lookup, nb, base, w_stride, rows, codes.data(),
                                                   ad.data(), m, y + t0);
    }
}

}  // namespace ds4::quant
