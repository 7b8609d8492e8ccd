// Multi-row IQ2_XXS x Q8_K dots, AVX-512 VNNI, in the pair lanes of iq2_xxs_step_avx512.h: the
// lanes, and so the bits, of dot_iq2_xxs_q8_k_avx512. One activation (decode): it is reordered
// once and every row runs the one-row loop. 2-5 on AVX512-VBMI CPUs: the few-row path
// (iq2_xxs_vbmi.h), each pair of blocks decoded in registers for all of them. More, or without
// VBMI: each weight row is decoded once into pairs
// of blocks (into L1, iq2xxs_decode_row) for all the activation rows, which are reordered and
// packed once into pair lanes, in tiles of up to 8, as a + 128 for vpdpbusd.
#include "quant/x86_simd.h"  // first: see there

#include <algorithm>
#include <utility>
#include <vector>

#include "quant/iq2_xxs/iq2_xxs_step_avx512.h"
#include "quant/iq2_xxs/iq2_xxs_vbmi.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"

namespace ds4::quant {

void multi_iq2_xxs_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                          const void* const* act, int64_t n_act, float* const* y) {
    // Tiles of up to 8 activation rows, as many as keep a tile's packed codes within 40 KiB:
    // the tile is re-read from L1 for every weight row of a block (at 4096 columns, 60
    // tokens, one thread: tiles of 3 / 4 / 6 / 8 rows ran at 180 / 261 / 285 / 296 GMAC/s).
    constexpr int kMaxTile = 8;
    const int64_t nb = n / kQK_K, np = (nb + 1) / 2;
    const int64_t row_pack = np * (8 * 64 + 16 * 4);  // one activation row's packed bytes
    const int kTile = int(std::clamp<int64_t>((40 << 10) / std::max<int64_t>(row_pack, 1), 1, kMaxTile));
    const int64_t tiles = (n_act + kTile - 1) / kTile;
    static const Iq2xxsLookupDecoder lookup;
    const bool vbmi = iq2xxs_vbmi_active();
    const auto* base = static_cast<const uint8_t*>(W);
    thread_local std::vector<Iq2xxsActBlock> ordered;
    if (ordered.size() < size_t(nb)) ordered.resize(size_t(nb));
    if (n_act == 1) {
        if (vbmi) return iq2xxs_rows_vbmi(nb, W, w_stride, rows, act[0], y[0]);
        iq2xxs_order_act(nb, static_cast<const BlockQ8_K*>(act[0]), ordered.data());
        iq2xxs_rows_ordered(lookup, nb, base, w_stride, rows, ordered.data(), y[0]);
        return;
    }
    if (vbmi && n_act <= kIq2xxsFewRowsMax)
        return iq2xxs_few_rows_vbmi(nb, W, w_stride, rows, act, int(n_act), y);
    // Every activation row reordered and packed once, tile by tile: tile i's codes at
    // codes + i * tile_bytes, [np * 8 registers][m rows][64 bytes]; its lane scales at
    // ad + i * tile_floats, [np][m rows][16].
    const size_t tile_bytes = size_t(np * 8 * kTile * 64), tile_floats = size_t(np * kTile * 16);
    struct alignas(64) Line {
        uint8_t b[64];
    };
    thread_local std::vector<Line> codes_buf;  // 64-byte aligned: the tile loads whole lines
    thread_local std::vector<Line> ad_buf;
    thread_local std::vector<Iq2xxsDecodedPair> decoded;
    if (codes_buf.size() < size_t(tiles) * tile_bytes / 64) codes_buf.resize(size_t(tiles) * tile_bytes / 64);
    if (ad_buf.size() < size_t(tiles) * tile_floats / 16) ad_buf.resize(size_t(tiles) * tile_floats / 16);
    uint8_t* codes = codes_buf.data()->b;
    float* ad = reinterpret_cast<float*>(ad_buf.data());
    for (int64_t i = 0; i < tiles; ++i) {
        const int64_t t0 = i * kTile;
        const int m = int(n_act - t0 < kTile ? n_act - t0 : kTile);
        uint8_t* pc = codes + size_t(i) * tile_bytes;
        float* pd = ad + size_t(i) * tile_floats;
        for (int t = 0; t < m; ++t) {
            if (vbmi) {
                iq2xxs_pack_act_vbmi(nb, act[t0 + t], m, t, pc, pd);
                continue;
            }
            iq2xxs_order_act(nb, static_cast<const BlockQ8_K*>(act[t0 + t]), ordered.data());
            for (int64_t p = 0; p < np; ++p) {
                uint8_t* regs[8];
                for (int j = 0; j < 8; ++j) regs[j] = pc + size_t(((p * 8 + j) * m + t) * 64);
                iq2xxs_pack_pair(&ordered[size_t(2 * p)], 2 * p + 1 < nb, regs, pd + size_t((p * m + t) * 16));
            }
        }
    }
    // Blocks of kRowBlock rows are decoded into L2, then each tile of activation rows (in L1)
    // runs over them: the whole activation set (60 tokens at 4096 columns: 270 KiB) re-read
    // from L2 for every weight row had bound the kernel at ~120-160 GMAC/s.
    constexpr int64_t kRowBlock = 16;
    if (decoded.size() < size_t(kRowBlock * np)) decoded.resize(size_t(kRowBlock * np));
    float out[kMaxTile];
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
        const int64_t nr = std::min(kRowBlock, rows - r0);
        for (int64_t i = 0; i < nr; ++i) {
            const auto* x = reinterpret_cast<const BlockIQ2_XXS*>(base + size_t(r0 + i) * w_stride);
            if (r0 + i + 1 < rows) prefetch_row(base + size_t(r0 + i + 1) * w_stride, w_stride);
            if (vbmi) iq2xxs_decode_row_vbmi(nb, x, decoded.data() + i * np);
            else iq2xxs_decode_row(lookup, nb, x, decoded.data() + i * np);
        }
        for (int64_t i = 0; i < tiles; ++i) {
            const int64_t t0 = i * kTile;
            const int m = int(n_act - t0 < kTile ? n_act - t0 : kTile);
            const uint8_t* pc = codes + size_t(i) * tile_bytes;
            const float* pd = ad + size_t(i) * tile_floats;
            for (int64_t r = 0; r < nr; ++r) {
                [&]<int... I>(std::integer_sequence<int, I...>) {
                    ((m == I + 1 ? iq2xxs_tile_pairs<I + 1>(np, decoded.data() + r * np, pc, pd, out) : void()), ...);
                }(std::make_integer_sequence<int, kMaxTile>{});
                for (int k = 0; k < m; ++k) y[t0 + k][r0 + r] = out[k];
            }
        }
    }
}

}  // namespace ds4::quant
