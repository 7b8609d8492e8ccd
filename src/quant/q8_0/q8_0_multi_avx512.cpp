// Q8_0 x Q8_0 dots, AVX-512 VNNI, for any number of weight rows and activation rows; the
// one-row dot (q8_0_avx512.cpp) is this with one of each.
//
// A row's blocks go in chunks of 16, one block per 32-bit lane (the arithmetic of q8_0.h:
// block b accumulates into lane b mod 16). Each chunk is transposed once: register i holds
// bytes 4i..4i+3 of every block's 32 codes. Weights are flipped to unsigned (w + 128) and
// activations, transposed the same way once per call, stay signed, so vpdpbusd of register i
// with activation register i adds four products to every block's lane; eight of them give
// each block its whole integer sum plus 128 * (sum of the activation block's codes), which
// the chain starts from negated (kept with the activation). Per chunk and (weight row,
// activation row): 8 vpdpbusd, a convert, the scale product and one FMA for 16 blocks, with
// no horizontal sums; the 16 lanes are summed once per pair at the end, in q8_0.h's fixed
// order. A row is read as one stream.
//
// Batched (more than kFewRows activation rows): blocks of kRowBlock weight rows are
// transposed into L2; the activations, in segments of kSegChunks chunks, go in L1 tiles of
// kTile rows, and over each tile run register tiles of kRegRows weight rows x kRegActs
// activation rows: per dword, 2 weight and 4 activation registers feed 8 vpdpbusd (10 loads
// per 8 vpdpbusd in a one-row tile, 6 here). The tile must stay in L1 with the two weight
// rows' segments: 16 rows x 2 chunks x 640 bytes. In L2, 1 thread (bench/kernel_ab.sh,
// 2026-12-05, two passes): 1.07-1.30x the one-row tile of 8 activation rows over
// 4096-column segments.
//
// Decode (one activation row) uses each weight chunk once, so it skips the transpose: see
// load_natural / reduce_blocks (in L2, 1 thread: 59-60 -> 63-65 GB/s).
// Few activation rows (2 .. kFewRows) stream each weight row once like decode, transposing
// each chunk in registers for all of them: see few_rows (in L2, 1 thread, 4096 columns: 2 / 4
// / 8 rows at 113 / 174 / 195 GMAC/s against 63 / 115 / 170 through the L2 tiles).
#include "quant/x86_simd.h"  // first: see there

#include <algorithm>
#include <vector>

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q8_0/q8_0.h"

namespace ds4::quant {
namespace {

constexpr int kChunk = 16;         // blocks per chunk (lanes)
constexpr int kTile = 16;          // activation rows per L1 tile (of one segment)
constexpr int kRegRows = 2;        // weight rows per register tile
constexpr int kRegActs = 4;        // activation rows per register tile
constexpr int kRowBlock = 16;      // weight rows transposed at a time
constexpr int64_t kSegChunks = 2;  // chunks of a row per pass (1024 columns; see the tile loop)
constexpr int kFewRows = 8;  // activation rows up to which few_rows runs (see there)

// One chunk of 16 blocks (64-byte aligned for the tile loop's loads).
struct alignas(64) Chunk {
    __m512i q[8];  // transposed: dword i of every block's codes; decode layout: blocks i, i + 8
                   // (weights: + 128 per byte)
    __m512 d;      // every block's scale
    __m512i corr;  // activations only: -128 * (sum of every block's codes), where a block's
                   // integer chain starts (the decode layout keeps +128 * sum, reduced)
};

// Word i < 16: 17i mod 64, the place of block i's scale in its 128-byte quarter of a chunk.
alignas(64) constexpr uint16_t kScaleWords[32] = {0, 17, 34, 51, 4, 21, 38, 55, 8, 25, 42, 59, 12, 29, 46, 63};

// The 16 scales of a whole chunk (544 bytes) without a gather (a 16-lane gather was ~15% of
// a decode chunk's time): d of block i is word 17i of the chunk, so words 64k..64k+63 (two
// 64-byte loads, all inside the chunk) hold those of blocks 4k..4k+3, picked by vpermt2w.
inline __m512 full_chunk_scales(const BlockQ8_0* x) {
    const auto* p = reinterpret_cast<const uint8_t*>(x);
    const __m512i idx = _mm512_load_si512(kScaleWords);
    __m512i s = _mm512_maskz_permutex2var_epi16(0x000F, _mm512_loadu_si512(p), idx, _mm512_loadu_si512(p + 64));
    for (int k = 1; k < 4; ++k)
        s = _mm512_or_si512(s, _mm512_maskz_permutex2var_epi16(__mmask32(0xFu << (4 * k)),
                                                               _mm512_loadu_si512(p + 128 * k), idx,
                                                               _mm512_loadu_si512(p + 128 * k + 64)));
    return _mm512_cvtph_ps(_mm512_castsi512_si256(s));
}

// The scales of blocks x[0 .. n) (n <= 16; the rest are zero) into c.d.
inline void set_scales(const BlockQ8_0* x, int n, Chunk& c) {
    if (n == kChunk) {
        c.d = full_chunk_scales(x);
        return;
    }
    // A partial chunk: one gather of every block's first dword (d and two codes), narrowed to
    // d (the full-chunk loads would reach past the last block).
    const __m512i offsets = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32(int32_t(sizeof(BlockQ8_0))));
    const __mmask16 present = __mmask16((1u << n) - 1);
    const __m512i first = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), present, offsets, x, 1);
    c.d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(first));
}

// Decode layout (one activation): no transpose. Register i holds block i's 32 codes in its
// low half and block i + 8's in its high half, as loaded; vpdpbusd against the activation in
// the same layout leaves 8 partial sums per block, and reduce_blocks adds them into lane b of
// block b (14 shuffles and 7 adds per chunk, against 24 shuffles for the transpose).
inline void load_natural(const BlockQ8_0* x, int n, bool flip, Chunk& c) {
    const __m512i bits = _mm512_set1_epi8(flip ? char(0x80) : 0);
    for (int i = 0; i < 8; ++i) {
        const __m256i l = i < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs))
                                : _mm256_setzero_si256();
        const __m256i h = i + 8 < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i + 8].qs))
                                    : _mm256_setzero_si256();
        c.q[i] = _mm512_xor_si512(_mm512_inserti64x4(_mm512_castsi256_si512(l), h, 1), bits);
    }
}

// Transposes blocks x[0 .. n) (n <= 16; the rest are zero) into c, flipping the codes' sign
// bits when `flip`.
inline void transpose_chunk(const BlockQ8_0* x, int n, bool flip, Chunk& c) {
    // z[i]: block i in the low half, block i + 8 in the high half.
    load_natural(x, n, false, c);
    const __m512i* z = c.q;
    // An 8x8 dword transpose in each 256-bit half.
    __m512i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm512_unpacklo_epi32(z[i], z[i + 1]);
        t[i + 1] = _mm512_unpackhi_epi32(z[i], z[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm512_unpacklo_epi64(t[i], t[i + 2]);          // dwords 0 / 4 of blocks i..i+3
        u[i + 1] = _mm512_unpackhi_epi64(t[i], t[i + 2]);      // 1 / 5
        u[i + 2] = _mm512_unpacklo_epi64(t[i + 1], t[i + 3]);  // 2 / 6
        u[i + 3] = _mm512_unpackhi_epi64(t[i + 1], t[i + 3]);  // 3 / 7
    }
    // 128-bit lane j of u[k] (k < 4) holds dword k (j even) or k + 4 (j odd) of blocks 0-3
    // (j < 2) or 8-11; u[k + 4] the same for blocks 4-7 / 12-15.
    const __m512i lo_pick = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi_pick = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    const __m512i bits = _mm512_set1_epi8(flip ? char(0x80) : 0);
    for (int k = 0; k < 4; ++k) {
        c.q[k] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[k], lo_pick, u[k + 4]), bits);
        c.q[k + 4] = _mm512_xor_si512(_mm512_permutex2var_epi64(u[k], hi_pick, u[k + 4]), bits);
    }
    set_scales(x, n, c);
}

// p[i]: dwords 0-7 partial sums of block i, dwords 8-15 of block i + 8. Returns lane b = the
// sum of block b's eight (exact integers: the order does not matter).
inline __m512i reduce_blocks(const __m512i* p) {
    __m512i s[4], t[2];
    // Per 128-bit lane: two partials of each of blocks 2j, 2j + 1 (and + 8).
    for (int j = 0; j < 4; ++j)
        s[j] = _mm512_add_epi32(_mm512_unpacklo_epi32(p[2 * j], p[2 * j + 1]),
                                _mm512_unpackhi_epi32(p[2 * j], p[2 * j + 1]));
    // Per 128-bit lane: one partial (of 4 dwords' worth) of blocks 4j .. 4j + 3 (and + 8);
    // lanes 0 / 1 hold the two halves of blocks 4j.., lanes 2 / 3 those of 4j + 8...
    for (int j = 0; j < 2; ++j)
        t[j] = _mm512_add_epi32(_mm512_unpacklo_epi64(s[2 * j], s[2 * j + 1]),
                                _mm512_unpackhi_epi64(s[2 * j], s[2 * j + 1]));
    const __m512i lo_pick = _mm512_setr_epi64(0, 1, 8, 9, 4, 5, 12, 13);
    const __m512i hi_pick = _mm512_setr_epi64(2, 3, 10, 11, 6, 7, 14, 15);
    return _mm512_add_epi32(_mm512_permutex2var_epi64(t[0], lo_pick, t[1]),
                            _mm512_permutex2var_epi64(t[0], hi_pick, t[1]));
}

// q8_0.h's final sum of the 16 lanes: k + (k+8), then + (k+4), + (k+2), + (k+1).
inline float sum_lanes(__m512 acc) {
    const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

// Adds chunk w (weights) times chunk a (one activation row) to acc.
inline __m512 chunk_fma(const Chunk& w, const Chunk& a, __m512 acc) {
    __m512i p0 = a.corr, p1 = _mm512_setzero_si512();
    for (int i = 0; i < 8; i += 2) {
        p0 = _mm512_dpbusd_epi32(p0, w.q[i], a.q[i]);
        p1 = _mm512_dpbusd_epi32(p1, w.q[i + 1], a.q[i + 1]);
    }
    const __m512i p = _mm512_add_epi32(p0, p1);
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(p), _mm512_mul_ps(w.d, a.d), acc);
}

struct alignas(64) Partial {
    __m512 v;
};

// Activation rows transposed once per call, segment by segment: chunk c of row t at
// chunks[slot(c, t)], so one segment of a tile's rows is contiguous (a stride of a whole row
// between them left it half in L2 at 8192 columns).
struct Activations {
    std::vector<Chunk> chunks;
    int64_t n_rows = 0;
    size_t slot(int64_t c, int64_t t) const {
        return size_t((c / kSegChunks * n_rows + t) * kSegChunks + c % kSegChunks);
    }
    void set(const void* const* act, int64_t n_act, int64_t nb, int64_t n_chunks) {
        n_rows = n_act;
        const int64_t slots = (n_chunks + kSegChunks - 1) / kSegChunks * kSegChunks * n_act;
        if (chunks.size() < size_t(slots)) chunks.resize(size_t(slots));
        const __m512i bias = _mm512_set1_epi8(char(0x80));
        for (int64_t t = 0; t < n_act; ++t) {
            const auto* a = static_cast<const BlockQ8_0*>(act[t]);
            for (int64_t c = 0; c < n_chunks; ++c) {
                Chunk& ch = chunks[slot(c, t)];
                const int64_t left = nb - c * kChunk;
                transpose_chunk(a + c * kChunk, int(left < kChunk ? left : kChunk), false, ch);
                __m512i corr = _mm512_setzero_si512();
                for (int i = 0; i < 8; ++i) corr = _mm512_dpbusd_epi32(corr, bias, ch.q[i]);
                ch.corr = _mm512_sub_epi32(_mm512_setzero_si512(), corr);
            }
        }
    }
};

// R weight rows' chunks c0 .. c1 - 1 (w[r]: row r's transposed chunks) against S activation
// rows (act: the first one's slot of that segment, Activations::slot; the others follow at
// kSegChunks). A register tile: per dword i, R weight registers and S activation registers
// feed R x S vpdpbusd chains, each starting from the activation's -128 x code sum, so a
// chunk costs R x S x 8 vpdpbusd for 8 x (R + S) loads. A row longer than a segment keeps
// its partial sums at keep[r][s] between segments, so every lane adds its chunks in the same
// order as one pass: the bits depend on neither R, S nor the split.
template <int R, int S>
inline void tile(const Chunk* const* w, int64_t n_chunks, int64_t c0, int64_t c1, const Chunk* act,
                 __m512* const* keep, float* const* y, int64_t row) {
    __m512 acc[R][S];
    for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) acc[r][s] = c0 == 0 ? _mm512_setzero_ps() : keep[r][s];
    for (int64_t c = c0; c < c1; ++c) {
        const Chunk* a = act + (c - c0);
        __m512i p[R][S];
        for (int s = 0; s < S; ++s) {
            const __m512i start = a[s * kSegChunks].corr;
            for (int r = 0; r < R; ++r) p[r][s] = start;
        }
#pragma GCC unroll 8
        for (int i = 0; i < 8; ++i) {
            __m512i av[S];
            for (int s = 0; s < S; ++s) {
                av[s] = a[s * kSegChunks].q[i];
                // In a register for all R products: left alone, GCC reloads it as each
                // vpdpbusd's memory operand (R loads instead of one).
                if constexpr (R > 1) __asm__("" : "+v"(av[s]));
            }
            for (int r = 0; r < R; ++r) {
                const __m512i wv = w[r][c].q[i];
                for (int s = 0; s < S; ++s) p[r][s] = _mm512_dpbusd_epi32(p[r][s], wv, av[s]);
            }
        }
        for (int r = 0; r < R; ++r)
            for (int s = 0; s < S; ++s)
                acc[r][s] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p[r][s]),
                                            _mm512_mul_ps(w[r][c].d, a[s * kSegChunks].d), acc[r][s]);
    }
    for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s) {
            if (c1 == n_chunks) y[s][row + r] = sum_lanes(acc[r][s]);
            else keep[r][s] = acc[r][s];
        }
}

// tile<R, m> for 1 <= m <= S with a compile-time m.
template <int R, int S>
inline void tile_any(int m, const Chunk* const* w, int64_t n_chunks, int64_t c0, int64_t c1,
                     const Chunk* act, __m512* const* keep, float* const* y, int64_t row) {
    if constexpr (S > 1) {
        if (m < S) return tile_any<R, S - 1>(m, w, n_chunks, c0, c1, act, keep, y, row);
    }
    tile<R, S>(w, n_chunks, c0, c1, act, keep, y, row);
}

// Few activation rows (2 .. kFewRows: a verification step, a few sequences): each weight
// row streams once, as in decode, and each of its chunks is transposed in registers and
// applied to every activation row at once (chunk_fma, the tile's arithmetic), with no
// transposed copy written to L2 and read back. The rows' accumulators stay in registers.
template <int T>
void few_rows(const uint8_t* base, size_t w_stride, int64_t rows, int64_t nb, int64_t n_chunks,
              const Activations& acts, float* const* y) {
    StreamAhead ahead(base, base + size_t(rows - 1) * w_stride + size_t(nb) * sizeof(BlockQ8_0));
    const Chunk* act[T];
    for (int64_t r = 0; r < rows; ++r) {
        const auto* x = reinterpret_cast<const BlockQ8_0*>(base + size_t(r) * w_stride);
        __m512 acc[T];
        for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
        for (int64_t c = 0; c < n_chunks; ++c) {
            ahead.at(x + c * kChunk);
            if (c % kSegChunks == 0)
                for (int t = 0; t < T; ++t) act[t] = &acts.chunks[acts.slot(c, t)];
            const int64_t left = nb - c * kChunk;
            Chunk w;
            transpose_chunk(x + c * kChunk, int(left < kChunk ? left : kChunk), true, w);
            for (int t = 0; t < T; ++t) acc[t] = chunk_fma(w, act[t][c % kSegChunks], acc[t]);
        }
        for (int t = 0; t < T; ++t) y[t][r] = sum_lanes(acc[t]);
    }
}

template <int T>
void few_rows_any(int m, const uint8_t* base, size_t w_stride, int64_t rows, int64_t nb,
                  int64_t n_chunks, const Activations& acts, float* const* y) {
    if constexpr (T > 2) {
        if (m < T) return few_rows_any<T - 1>(m, base, w_stride, rows, nb, n_chunks, acts, y);
    }
    few_rows<T>(base, w_stride, rows, nb, n_chunks, acts, y);
}

}  // namespace

void multi_q8_0_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y) {
    const int64_t nb = n / kQK8_0, n_chunks = (nb + kChunk - 1) / kChunk;
    thread_local Activations acts;
    thread_local std::vector<Chunk> rows_t;  // a block of transposed weight rows
    const auto* base = static_cast<const uint8_t*>(W);
    if (n_act == 1) {
        // Decode: the activation in the decode layout, each weight chunk used once, straight
        // from the registers.
        if (rows <= 0) return;
        thread_local std::vector<Chunk> a_nat;
        if (a_nat.size() < size_t(n_chunks)) a_nat.resize(size_t(n_chunks));
        const auto* a = static_cast<const BlockQ8_0*>(act[0]);
        const __m512i bias = _mm512_set1_epi8(char(0x80));
        for (int64_t c = 0; c < n_chunks; ++c) {
            const int64_t left = nb - c * kChunk;
            const int nc = int(left < kChunk ? left : kChunk);
            Chunk& ch = a_nat[size_t(c)];
            load_natural(a + c * kChunk, nc, false, ch);
            set_scales(a + c * kChunk, nc, ch);
            __m512i p[8];
            for (int i = 0; i < 8; ++i) p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), bias, ch.q[i]);
            ch.corr = reduce_blocks(p);
        }
        StreamAhead ahead(base, base + size_t(rows - 1) * w_stride + size_t(nb) * sizeof(BlockQ8_0));
        for (int64_t r = 0; r < rows; ++r) {
            const auto* x = reinterpret_cast<const BlockQ8_0*>(base + size_t(r) * w_stride);
            __m512 acc = _mm512_setzero_ps();
            for (int64_t c = 0; c < n_chunks; ++c) {
                ahead.at(x + c * kChunk);
                const int64_t left = nb - c * kChunk;
                const int nc = int(left < kChunk ? left : kChunk);
                Chunk w;
                load_natural(x + c * kChunk, nc, true, w);
                set_scales(x + c * kChunk, nc, w);
                const Chunk& ac = a_nat[size_t(c)];
                __m512i p[8];
                for (int i = 0; i < 8; ++i) p[i] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.q[i], ac.q[i]);
                const __m512i sum = _mm512_sub_epi32(reduce_blocks(p), ac.corr);
                acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sum), _mm512_mul_ps(w.d, ac.d), acc);
            }
            y[0][r] = sum_lanes(acc);
        }
        return;
    }
    acts.set(act, n_act, nb, n_chunks);
    if (n_act <= kFewRows) {
        if (rows > 0) few_rows_any<kFewRows>(int(n_act), base, w_stride, rows, nb, n_chunks, acts, y);
        return;
    }
    // Blocks of kRowBlock rows are transposed into L2, then each tile of activation rows
    // (in L1) runs over them.
    if (rows_t.size() < size_t(kRowBlock * n_chunks)) rows_t.resize(size_t(kRowBlock * n_chunks));
    // Partial sums of (row, activation) pairs between segments, when a row has several.
    thread_local std::vector<Partial> partial;
    if (partial.size() < size_t(kRowBlock * n_act))
        partial.resize(size_t(kRowBlock * n_act));
    for (int64_t r0 = 0; r0 < rows; r0 += kRowBlock) {
        const int64_t nr = rows - r0 < kRowBlock ? rows - r0 : kRowBlock;
        for (int64_t i = 0; i < nr; ++i) {
            const auto* x = reinterpret_cast<const BlockQ8_0*>(base + size_t(r0 + i) * w_stride);
            if (r0 + i + 1 < rows) prefetch_row(base + size_t(r0 + i + 1) * w_stride, size_t(nb) * sizeof(BlockQ8_0));
            for (int64_t c = 0; c < n_chunks; ++c) {
                const int64_t left = nb - c * kChunk;
                transpose_chunk(x + c * kChunk, int(left < kChunk ? left : kChunk), true,
                                rows_t[size_t(i * n_chunks + c)]);
            }
        }
        // Segments of the row: a tile's activation chunks of one segment stay in L1 while the
        // block's rows pass (at 8192 columns, whole rows spilled the tile to L2: half speed;
        // with register tiles of two weight rows, 4096-column segments of 8 activation rows
        // spilled it too: 0.82x).
        for (int64_t c0 = 0; c0 < n_chunks; c0 += kSegChunks) {
            const int64_t c1 = std::min(n_chunks, c0 + kSegChunks);
            for (int64_t t0 = 0; t0 < n_act; t0 += kTile) {
                const int64_t m = n_act - t0 < kTile ? n_act - t0 : kTile;
                for (int64_t i = 0; i < nr; i += kRegRows) {
                    const int rr = int(nr - i < kRegRows ? nr - i : kRegRows);
                    const Chunk* w[kRegRows];
                    for (int r = 0; r < rr; ++r) w[r] = rows_t.data() + (i + r) * n_chunks;
                    // Register tiles over the L1 tile: the weight rows' chunks come from L2
                    // for the first, from L1 for the others.
                    for (int64_t s0 = 0; s0 < m; s0 += kRegActs) {
                        const int sm = int(m - s0 < kRegActs ? m - s0 : kRegActs);
                        __m512* keep[kRegRows];  // keep[r][s]: used when c1 < n_chunks
                        for (int r = 0; r < rr; ++r) keep[r] = &partial[size_t((i + r) * n_act + t0 + s0)].v;
                        const Chunk* a = &acts.chunks[acts.slot(c0, t0 + s0)];
                        if (rr == kRegRows)
                            tile_any<kRegRows, kRegActs>(sm, w, n_chunks, c0, c1, a, keep, y + t0 + s0, r0 + i);
                        else  // the block's last rows
                            for (int r = 0; r < rr; ++r)
                                tile_any<1, kRegActs>(sm, w + r, n_chunks, c0, c1, a, keep + r, y + t0 + s0, r0 + i + r);
                    }
                }
            }
        }
    }
}

}  // namespace ds4::quant
