// Q8_0 x Q8_0 dots, AVX2, for any number of weight rows and activation rows; the one-row
// dot (q8_0_avx2.cpp) is this with one of each.
//
// The AVX-512 kernel's layout (q8_0_multi_avx512.cpp) in two 256-bit halves: a chunk of 16
// blocks is two transposed groups of 8 (blocks 0-7 feed lanes 0-7 of accumulator lo, 8-15
// those of hi: q8_0.h's lanes). Without VNNI the four products per lane come from vpmaddubsw
// on |w| and the activation with w's signs (at most 2 * 128 * 127 per pair, no saturation)
// and vpmaddwd with ones. Activations are transposed once per call. Decode (one activation)
// skips the transpose (natural_group_fma).
#include "quant/x86_simd.h"  // first: see there

#include <vector>

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/q8_0/q8_0.h"

namespace ds4::quant {
namespace {

constexpr int kGroup = 8;   // blocks per transposed group (lanes)
constexpr int kTile = 4;    // activation rows per register tile

struct alignas(32) Group {
    __m256i q[8];  // dword i of every block's codes
    __m256 d;      // every block's scale
};

// Blocks x[0 .. n) (n <= 8; the rest are zero) as loaded, register i block i's 32 codes (the
// decode layout), and their scales.
inline void load_group(const BlockQ8_0* x, int n, Group& g) {
    // The scales are packed in general registers: eight 16-bit stores read back as one
    // 128-bit load would miss store-to-load forwarding.
    uint64_t d[2] = {0, 0};
    for (int i = 0; i < 8; ++i) {
        g.q[i] = i < n ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[i].qs)) : _mm256_setzero_si256();
        if (i < n) d[i / 4] |= uint64_t(x[i].d) << (16 * (i % 4));
    }
    g.d = _mm256_cvtph_ps(_mm_set_epi64x(int64_t(d[1]), int64_t(d[0])));
}

// Transposes blocks x[0 .. n) (n <= 8; the rest are zero) into g.
inline void transpose_group(const BlockQ8_0* x, int n, Group& g) {
    load_group(x, n, g);
    const __m256i* z = g.q;
    __m256i t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = _mm256_unpacklo_epi32(z[i], z[i + 1]);
        t[i + 1] = _mm256_unpackhi_epi32(z[i], z[i + 1]);
    }
    for (int i = 0; i < 8; i += 4) {
        u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);          // dwords 0 / 4 of blocks i..i+3
        u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);      // 1 / 5
        u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]);  // 2 / 6
        u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]);  // 3 / 7
    }
    for (int k = 0; k < 4; ++k) {
        g.q[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
        g.q[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
    }
}

// Adds group w (weights) times group a (one activation row) to acc.
inline __m256 group_fma(const Group& w, const Group& a, __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p0 = _mm256_setzero_si256(), p1 = p0;
    for (int i = 0; i < 8; i += 2) {
        const __m256i s0 = _mm256_maddubs_epi16(_mm256_sign_epi8(w.q[i], w.q[i]), _mm256_sign_epi8(a.q[i], w.q[i]));
        const __m256i s1 = _mm256_maddubs_epi16(_mm256_sign_epi8(w.q[i + 1], w.q[i + 1]),
                                                _mm256_sign_epi8(a.q[i + 1], w.q[i + 1]));
        p0 = _mm256_add_epi32(p0, _mm256_madd_epi16(s0, ones));
        p1 = _mm256_add_epi32(p1, _mm256_madd_epi16(s1, ones));
    }
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(p0, p1)), _mm256_mul_ps(w.d, a.d), acc);
}

// Decode: group w (weights) times group a (one activation row), both as loaded, added to
// acc. Each block's products leave 8 partial sums (vpmaddubsw, vpmaddwd), added into block
// lanes by 10 shuffles and 7 adds (the transpose took 24 shuffles; the integer sums are
// exact, so the bits are the same).
inline __m256 natural_group_fma(const Group& w, const Group& a, __m256 acc) {
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i p[8];
    for (int i = 0; i < 8; ++i)
        p[i] = _mm256_madd_epi16(
            _mm256_maddubs_epi16(_mm256_sign_epi8(w.q[i], w.q[i]), _mm256_sign_epi8(a.q[i], w.q[i])), ones);
    __m256i s[4], t[2];
    for (int j = 0; j < 4; ++j)  // per 128-bit lane: two partials of blocks 2j, 2j + 1
        s[j] = _mm256_add_epi32(_mm256_unpacklo_epi32(p[2 * j], p[2 * j + 1]),
                                _mm256_unpackhi_epi32(p[2 * j], p[2 * j + 1]));
    for (int j = 0; j < 2; ++j)  // per 128-bit lane: one partial of blocks 4j .. 4j + 3
        t[j] = _mm256_add_epi32(_mm256_unpacklo_epi64(s[2 * j], s[2 * j + 1]),
                                _mm256_unpackhi_epi64(s[2 * j], s[2 * j + 1]));
    const __m256i sum = _mm256_add_epi32(_mm256_permute2x128_si256(t[0], t[1], 0x20),
                                         _mm256_permute2x128_si256(t[0], t[1], 0x31));
    return _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(w.d, a.d), acc);
}

// q8_0.h's final sum: lo + hi (lanes k and k + 8), then + (k+4), + (k+2), + (k+1).
inline float sum_lanes(__m256 lo, __m256 hi) {
    const __m256 h = _mm256_add_ps(lo, hi);
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
}

// Transposes the nb blocks at x into groups g[0 .. ceil(nb / 8)).
inline void transpose_row(const BlockQ8_0* x, int64_t nb, Group* g) {
    for (int64_t k = 0; k * kGroup < nb; ++k) {
        const int64_t left = nb - k * kGroup;
        transpose_group(x + k * kGroup, int(left < kGroup ? left : kGroup), g[k]);
    }
}

// One weight row's groups against activation rows t0 .. t0 + T - 1. Group k feeds lo when
// k is even (blocks 16c .. 16c+7), hi when odd.
template <int T>
inline void tile(const Group* w, int64_t n_groups, const Group* act, int64_t t0, float* out) {
    __m256 lo[T], hi[T];
    for (int t = 0; t < T; ++t) lo[t] = hi[t] = _mm256_setzero_ps();
    for (int64_t k = 0; k < n_groups; ++k)
        for (int t = 0; t < T; ++t) {
            const Group& a = act[(t0 + t) * n_groups + k];
            if (k % 2 == 0) lo[t] = group_fma(w[k], a, lo[t]);
            else hi[t] = group_fma(w[k], a, hi[t]);
        }
    for (int t = 0; t < T; ++t) out[t] = sum_lanes(lo[t], hi[t]);
}

template <int T>
inline void tile_any(int m, const Group* w, int64_t n_groups, const Group* act, int64_t t0, float* out) {
    if constexpr (T > 1) {
        if (m < T) return tile_any<T - 1>(m, w, n_groups, act, t0, out);
    }
    tile<T>(w, n_groups, act, t0, out);
}

}  // namespace

void multi_q8_0_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                     const void* const* act, int64_t n_act, float* const* y) {
    static_assert(kQ8_0Lanes == 2 * kGroup);
    const int64_t nb = n / kQK8_0, n_groups = (nb + kGroup - 1) / kGroup;
    thread_local std::vector<Group> acts, row;
    if (acts.size() < size_t(n_act * n_groups)) acts.resize(size_t(n_act * n_groups));
    if (row.size() < size_t(n_groups)) row.resize(size_t(n_groups));
    const auto* base = static_cast<const uint8_t*>(W);
    if (n_act == 1) {
        // Decode: the activation and each weight group as loaded, each group used once.
        if (rows <= 0) return;
        const auto* a = static_cast<const BlockQ8_0*>(act[0]);
        for (int64_t k = 0; k < n_groups; ++k) {
            const int64_t left = nb - k * kGroup;
            load_group(a + k * kGroup, int(left < kGroup ? left : kGroup), acts[size_t(k)]);
        }
        StreamAhead ahead(base, base + size_t(rows - 1) * w_stride + size_t(nb) * sizeof(BlockQ8_0));
        for (int64_t r = 0; r < rows; ++r) {
            const auto* x = reinterpret_cast<const BlockQ8_0*>(base + size_t(r) * w_stride);
            __m256 lo = _mm256_setzero_ps(), hi = lo;
            for (int64_t k = 0; k < n_groups; ++k) {
                ahead.at(x + k * kGroup);
                Group g;
                const int64_t left = nb - k * kGroup;
                load_group(x + k * kGroup, int(left < kGroup ? left : kGroup), g);
                if (k % 2 == 0) lo = natural_group_fma(g, acts[size_t(k)], lo);
                else hi = natural_group_fma(g, acts[size_t(k)], hi);
            }
            y[0][r] = sum_lanes(lo, hi);
        }
        return;
    }
    for (int64_t t = 0; t < n_act; ++t)
        transpose_row(static_cast<const BlockQ8_0*>(act[t]), nb, acts.data() + t * n_groups);
    float out[kTile];
    for (int64_t r = 0; r < rows; ++r) {
        transpose_row(reinterpret_cast<const BlockQ8_0*>(base + size_t(r) * w_stride), nb, row.data());
        for (int64_t t0 = 0; t0 < n_act; t0 += kTile) {
            const int m = int(n_act - t0 < kTile ? n_act - t0 : kTile);
            tile_any<kTile>(m, row.data(), n_groups, acts.data(), t0, out);
            for (int t = 0; t < m; ++t) y[t0 + t][r] = out[t];
        }
    }
}

}  // namespace ds4::quant
