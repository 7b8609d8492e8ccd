// Multi-row IQ2_XXS x Q8_K dots, AVX-512 VNNI, in the group-lane step order of
// iq2_xxs_step_avx512.h: the lanes, and so the bits, of dot_iq2_xxs_q8_k_avx512. One
// activation (decode): it is reordered once and every row runs the one-row loop. Several:
// each weight row is decoded once (into L1, iq2xxs_decode_row) for all the activation rows,
// which are reordered and packed once, in tiles of up to 8, as a + 128 for vpdpbusd.
#include "quant/x86_simd.h"  // first: see there

#include <algorithm>
#include <utility>
#include <vector>

#include "quant/iq2_xxs_step_avx512.h"
#include "quant/iq2_xxs_vbmi.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"

namespace ds4::quant {

void multi_iq2_xxs_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                          const void* const* act, int64_t n_act, float* const* y) {
    // Tiles of up to 8 activation rows, as many as keep a tile's codes within 24 KiB: the tile
    // is re-read from L1 for every weight row (at 4096 columns, 8 rows = 32 KiB spilled to L2:
    // 48 tokens ran at 96 GMAC/s with tiles of 8, 130 with tiles of 6).
    constexpr int kMaxTile = 8;
    const int64_t nb = n / kQK_K;
    const int kTile = int(std::clamp<int64_t>((24 << 10) / std::max<int64_t>(n, 1), 1, kMaxTile));
    const int64_t tiles = (n_act + kTile - 1) / kTile;
    static const Iq2xxsLookupDecoder lookup;
    const bool vbmi = iq2xxs_vbmi_active();
    const auto* base = static_cast<const uint8_t*>(W);
    thread_local std::vector<Iq2xxsActBlock> ordered;
    if (ordered.size() < size_t(nb)) ordered.resize(size_t(nb));
    if (n_act == 1) {
        iq2xxs_order_act(nb, static_cast<const BlockQ8_K*>(act[0]), ordered.data());
        if (vbmi) iq2xxs_rows_vbmi(nb, W, w_stride, rows, ordered.data(), y[0]);
        else iq2xxs_rows_ordered(lookup, nb, base, w_stride, rows, ordered.data(), y[0]);
        return;
    }
    // Every activation row reordered and packed once, tile by tile: tile i at
    // codes + i * tile_bytes, [nb * 4 steps][m rows][64 bytes].
    const size_t tile_bytes = size_t(nb * 4 * kTile * 64);
    thread_local std::vector<uint8_t> codes;
    thread_local std::vector<float> ad;
    thread_local std::vector<Iq2xxsDecodedBlock> decoded;
    if (codes.size() < size_t(tiles) * tile_bytes) codes.resize(size_t(tiles) * tile_bytes);
    if (ad.size() < size_t(tiles * nb * kTile)) ad.resize(size_t(tiles * nb * kTile));
    if (decoded.size() < size_t(nb)) decoded.resize(size_t(nb));
    const __m512i bias = _mm512_set1_epi8(char(0x80));
    for (int64_t i = 0; i < tiles; ++i) {
        const int64_t t0 = i * kTile;
        const int m = int(n_act - t0 < kTile ? n_act - t0 : kTile);
        uint8_t* pc = codes.data() + size_t(i) * tile_bytes;
        float* pd = ad.data() + size_t(i * nb * kTile);
        for (int t = 0; t < m; ++t) {
            iq2xxs_order_act(nb, static_cast<const BlockQ8_K*>(act[t0 + t]), ordered.data());
            for (int64_t b = 0; b < nb; ++b) {
                pd[size_t(b * m + t)] = ordered[size_t(b)].d;
                for (int k = 0; k < 4; ++k)
                    _mm512_storeu_si512(pc + size_t(((b * 4 + k) * m + t) * 64),
                                        _mm512_xor_si512(_mm512_load_si512(ordered[size_t(b)].q[k]), bias));
            }
        }
    }
    float out[kMaxTile];
    for (int64_t r = 0; r < rows; ++r) {
        const auto* x = reinterpret_cast<const BlockIQ2_XXS*>(base + size_t(r) * w_stride);
        if (r + 1 < rows) prefetch_row(base + size_t(r + 1) * w_stride, w_stride);
        if (vbmi) iq2xxs_decode_row_vbmi(nb, x, decoded.data());
        else iq2xxs_decode_row(lookup, nb, x, decoded.data());
        for (int64_t i = 0; i < tiles; ++i) {
            const int64_t t0 = i * kTile;
            const int m = int(n_act - t0 < kTile ? n_act - t0 : kTile);
            const uint8_t* pc = codes.data() + size_t(i) * tile_bytes;
            const float* pd = ad.data() + size_t(i * nb * kTile);
            [&]<int... I>(std::integer_sequence<int, I...>) {
                ((m == I + 1 ? iq2xxs_tile_decoded<I + 1>(nb, decoded.data(), pc, pd, out) : void()), ...);
            }(std::make_integer_sequence<int, kMaxTile>{});
            for (int k = 0; k < m; ++k) y[t0 + k][r] = out[k];
        }
    }
}

}  // namespace ds4::quant
