// The AVX512-VBMI path of the IQ2_XXS AVX-512 kernels (iq2_xxs_vbmi.h): vector codebook
// lookups over pairs of blocks, in the pair lanes of iq2_xxs_step_avx512.h from the start.
// A pair's 64 points (32 per block) sit one per byte, byte i for point i % 32 of block i / 32,
// so i32 lane l (bytes 4l..4l+3: the four points of one group) is group l % 8 of block l / 8.
// Per pair:
//   points: one vpermt2b gathers the 64 point indices. Each codebook point is 16 bits, 2 per
//     value (0, 1, 2 for 8, 25, 43), values 0-3 in its low byte and 4-7 in its high byte; the
//     two byte planes come by two vpermt2b each over 128-entry halves of the codebook's planes
//     and a blend on index bit 7;
//   step s = 0..7 (value s of every point; the multi-row tiles' decode): one vgf2p8affineqb
//     maps every byte's bits 2 (s % 4), +1 (code c = b0 + 2 b1) to 8 ^ 17 b0 ^ 35 b1 = 8, 25,
//     43, affine over GF(2);
//   signs: one vpermt2d gathers the 16 aux dwords (whose top bits are also the groups' 2l+1),
//     vpmultishiftqb puts point i's 7-bit sign field in byte i, vpermi2b maps it to its 8-bit
//     mask (the parity bit added) through the 128-byte table, and per step one vptestmb picks
//     bit s of every byte.
// Eight vpdpbusd then accumulate the pair's lanes: the integers L_l of iq2_xxs_step_avx512.h,
// the same float operations, so the same bits as the lookup decoder. That is 8 shuffles per
// pair; the block-at-a-time decoder this replaced (vpermt2w lookups of 16-bit points, sign
// masks by vpshufbitqmb, the half-group lanes added into pair lanes) needed 22, and the
// decode-time kernel went from 11.1-11.5 to 13.3-13.9 GB/s per thread on the 4-layer Flash
// file (in-process A/B), from 3.2x to 4.0x ggml's speed in cache (matvec_bench).
// One to five activations (decode, the one-row dot, few-row calls; few_pair) take each value
// as u = 43 + w, unsigned, so vpdpbusd reads the activation as its signed memory operand and
// one instruction per step and row remains; each row's integers start from -43 x the
// activation's lane sums (made once per call). u comes from one vpermb per step: per pair
// four index bytes per point, index k holding the 2-bit codes and the signs of values 2k and
// 2k + 1 in its bits 0-5 (the bits vpermb reads), each one vpternlogd bit select of a code
// plane (shifted by 2 for odd k) and the sign masks (shifted by 2 for k >= 2), whose table
// puts the signs where the selects want them (kFewSignBit); four 64-byte tables map an index
// to 43 +- magnitude. Per pair: the 8 shuffles above, 3 shifts and 4 selects, then per step
// one vpermb and one vpdpbusd per row (the form before, affine + sign test + masked subtract +
// vpdpbusd, ran one row at 19-20 GB/s per thread in L2; this one 25-27, `bench/kernel_ab.sh`,
// docs/PERFORMANCE_JOURNAL.md 2026-12-05 16:03). One and two rows run two vpdpbusd chains
// per row; the scale product is float(isum) x float(2l+1), exact as the integer product was.
// The point codes are derived from the codebook (iq2_xxs_grid.h) at start-up, not stored.
//
// Everything after the target pragma is compiled for AVX512-VBMI and GFNI and has internal
// linkage except the entry points, which run only when the CPU has both.
#include "quant/x86_simd.h"  // first: see there

#include <cpuid.h>

#include <atomic>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "quant/blocks.h"
#include "quant/iq2_xxs/iq2_xxs_grid.h"
#include "quant/iq2_xxs/iq2_xxs_vbmi.h"

namespace ds4::quant {
namespace {

bool cpu_has_vbmi() {
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & bit_AVX512VBMI) && (c & bit_GFNI);
}

std::atomic<bool> g_allow_vbmi{true};

// Point i's values as 2-bit codes: value j at bits 2j.
struct PointCodes {
    alignas(64) uint16_t code[256];
    PointCodes() {
        for (int i = 0; i < 256; ++i) {
            uint16_t c = 0;
            for (int j = 0; j < 8; ++j) {
                const uint8_t m = uint8_t(kIq2xxsGrid[i] >> (8 * j));
                c = uint16_t(c | ((m == 0x08 ? 0 : m == 0x19 ? 1 : 2) << (2 * j)));
            }
            code[i] = c;
        }
    }
};

}  // namespace

bool iq2xxs_vbmi_active() {
    static const bool has = cpu_has_vbmi();
    return has && g_allow_vbmi.load(std::memory_order_relaxed);
}

void iq2xxs_allow_vbmi(bool allow) { g_allow_vbmi.store(allow); }

}  // namespace ds4::quant

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx512vbmi,gfni"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx512vbmi,gfni")
#endif

#include "quant/iq2_xxs/iq2_xxs_step_avx512.h"

namespace ds4::quant {
namespace {

// Step j's vgf2p8affineqb matrix: output bit i comes from byte 7 - i, and 8 ^ 17 b0 ^ 35 b1
// (b0, b1 = bits 2j, 2j+1) sets bit 0 from b0 ^ b1, bit 1 from b1, bit 4 from b0, bit 5 from
// b1, the constant 8 bit 3.
constexpr uint64_t magnitude_matrix(int j) {
    return (uint64_t(0b11) << (56 + 2 * j)) | (uint64_t(0b10) << (48 + 2 * j)) |
           (uint64_t(0b01) << (24 + 2 * j)) | (uint64_t(0b10) << (16 + 2 * j));
}

// few_pair's step indices: four bytes per point, index k (k = 0..3) holding the codes and
// signs of values 2k and 2k + 1 in its bits 0-5, the bits vpermb reads (6-7 are ignored).
// Layout 0 (k = 0, 2): codes at bits 0-1 (value 2k) and 2-3, signs at bits 4 and 5; layout 1
// (k = 1, 3): signs at bits 0 and 1, codes at 2-3 and 4-5. With the code planes as they are
// (value j at bits 2 (j % 4)) and the sign mask S of a point with sign s at bit kFewSignBit[s],
// index 0 is a bit select of the low plane and S, index 1 of the low plane >> 2 and S,
// index 2 of the high plane and S >> 2, index 3 of the high plane >> 2 and S >> 2 (16-bit
// shifts: a byte's bits 0-5 are its own bits 2-7).
constexpr int kFewSignBit[8] = {4, 5, 0, 1, 6, 7, 2, 3};
constexpr int kFewCodeShift[2][2] = {{0, 2}, {2, 4}};  // [layout][value 2k, 2k + 1]
constexpr int kFewSignShift[2][2] = {{4, 5}, {0, 1}};

// One activation pair in step order, made once per call and shared by every weight row.
struct alignas(64) ActPair {
    int8_t q[8][64];  // step s, byte i: value 32g + 8k + s of block 2p + i / 32 (g, k of point i % 32)
    float d[2];       // the two blocks' d (0 for the missing second block of an odd last pair)
};

struct PairDecoder {
    __m512i lo[4], hi[4];   // byte planes of the 256 point codes, 64 entries per register
    __m512i index_pick;     // vpermt2b: byte i <- index byte of point i % 32 of block i / 32
    __m512i aux_pick;       // vpermt2d: dword l <- aux dword of group l % 8 of block l / 8
    __m512i field_offsets;  // vpmultishiftqb: byte 8q + m <- field m % 4 of aux dword 2q + m / 4
    __m512i sign_masks[2];  // kIq2xxsSignMasks
    __m512i bit[8];         // 1 << s in every byte
    __m512i few_signs[2];   // sign field -> the 8 signs in kFewSignBit order (few_pair)
    __m512i few_table[2][2];  // few_pair: [layout][value parity] index -> u = 43 + w
    __m512 odd_floats;      // lane l: 2l + 1

    PairDecoder() {
        static const PointCodes codes;
        alignas(64) uint8_t c[64];
        for (int q = 0; q < 4; ++q) {
            for (int i = 0; i < 64; ++i) c[i] = uint8_t(codes.code[64 * q + i]);
            lo[q] = _mm512_load_si512(c);
            for (int i = 0; i < 64; ++i) c[i] = uint8_t(codes.code[64 * q + i] >> 8);
            hi[q] = _mm512_load_si512(c);
        }
        // Block b's 64 code bytes (its qs) are table bytes 64b..64b+63: group g's indices at
        // 8g..8g+3, its aux dword at 8g+4.
        for (int i = 0; i < 64; ++i) c[i] = uint8_t(64 * (i / 32) + 8 * ((i % 32) / 4) + i % 4);
        index_pick = _mm512_load_si512(c);
        alignas(64) int32_t d[16];
        for (int l = 0; l < 16; ++l) d[l] = 16 * (l / 8) + 2 * (l % 8) + 1;
        aux_pick = _mm512_load_si512(d);
        for (int i = 0; i < 64; ++i) c[i] = uint8_t(32 * ((i % 8) / 4) + 7 * (i % 4));
        field_offsets = _mm512_load_si512(c);
        sign_masks[0] = _mm512_loadu_si512(kIq2xxsSignMasks.data());
        sign_masks[1] = _mm512_loadu_si512(kIq2xxsSignMasks.data() + 64);
        for (int s = 0; s < 8; ++s) bit[s] = _mm512_set1_epi8(char(1 << s));
        for (int f = 0; f < 128; ++f) {
            uint8_t m = 0;
            for (int s = 0; s < 8; ++s) m = uint8_t(m | (((kIq2xxsSignMasks[size_t(f)] >> s) & 1) << kFewSignBit[s]));
            c[f % 64] = m;
            if (f % 64 == 63) few_signs[f / 64] = _mm512_load_si512(c);
        }
        alignas(64) float f[16];
        for (int l = 0; l < 16; ++l) f[l] = float(2 * l + 1);
        odd_floats = _mm512_load_ps(f);
        for (int l = 0; l < 2; ++l)
            for (int h = 0; h < 2; ++h) {
                for (int i = 0; i < 64; ++i) {
                    const int code = (i >> kFewCodeShift[l][h]) & 3, m = code == 0 ? 8 : code == 1 ? 25 : 43;
                    c[i] = uint8_t((i >> kFewSignShift[l][h]) & 1 ? 43 - m : 43 + m);
                }
                few_table[l][h] = _mm512_load_si512(c);
            }
    }

    // A pair's codes, signs and aux dwords (x[1] missing unless kSecond: read as zeros).
    struct Planes {
        __m512i plane[2];  // point codes: low bytes (values 0-3), high bytes (values 4-7)
        __m512i signs;     // byte i: point i's 8-bit sign mask
        __m512i aux;       // dword l: aux of group l % 8 of block l / 8
    };
    template <bool kSecond>
    [[gnu::always_inline]] Planes planes(const BlockIQ2_XXS* x) const {
        return planes<kSecond>(x, sign_masks);
    }
    // The same with the sign masks from the table sign_table (few_signs: few_pair's order).
    template <bool kSecond>
    [[gnu::always_inline]] Planes planes(const BlockIQ2_XXS* x, const __m512i* sign_table) const {
        const __m512i b0 = _mm512_loadu_si512(x[0].qs);
        const __m512i b1 = kSecond ? _mm512_loadu_si512(x[1].qs) : _mm512_setzero_si512();
        const __m512i index = _mm512_permutex2var_epi8(b0, index_pick, b1);
        const __mmask64 upper = _mm512_movepi8_mask(index);  // index >= 128
        Planes p;
        p.plane[0] = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(lo[0], index, lo[1]),
                                            _mm512_permutex2var_epi8(lo[2], index, lo[3]));
        p.plane[1] = _mm512_mask_blend_epi8(upper, _mm512_permutex2var_epi8(hi[0], index, hi[1]),
                                            _mm512_permutex2var_epi8(hi[2], index, hi[3]));
        p.aux = _mm512_permutex2var_epi32(b0, aux_pick, b1);
        p.signs = _mm512_permutex2var_epi8(sign_table[0], _mm512_multishift_epi64_epi8(field_offsets, p.aux),
                                           sign_table[1]);
        return p;
    }
    // Step s: the magnitudes of value s of every point, and which are negative.
    [[gnu::always_inline]] __m512i magnitudes(const Planes& p, int s) const {
        return _mm512_gf2p8affine_epi64_epi8(p.plane[s / 4], _mm512_set1_epi64(int64_t(magnitude_matrix(s % 4))), 8);
    }
    [[gnu::always_inline]] __mmask64 negative(const Planes& p, int s) const {
        return _mm512_test_epi8_mask(p.signs, bit[s]);
    }
    // The groups' 2l+1: (aux >> 27) | 1 (1 in a missing block's lanes, whose sums are 0).
    static __m512i scales(const Planes& p) {
        return _mm512_or_si512(_mm512_srli_epi32(p.aux, 27), _mm512_set1_epi32(1));
    }

    // For the multi-row kernel: the pair's signed values (step s in w[s], a missing block's
    // half zero), its lanes' 2l+1, -128 * weight sum and d (iq2_xxs_step_avx512.h).
    template <bool kSecond>
    [[gnu::always_inline]] void decode(const BlockIQ2_XXS* x, Iq2xxsDecodedPair& o) const {
        const __m512i zero = _mm512_setzero_si512(), bias = _mm512_set1_epi8(char(0x80));
        const Planes p = planes<kSecond>(x);
        const __mmask64 keep = kSecond ? ~__mmask64(0) : __mmask64(0xffffffffu);
        __m512i corr = zero;
        for (int s = 0; s < 8; ++s) {
            const __m512i mag = magnitudes(p, s);
            const __m512i v = _mm512_maskz_mov_epi8(keep, _mm512_mask_sub_epi8(mag, negative(p, s), zero, mag));
            corr = _mm512_dpbusd_epi32(corr, bias, v);
            _mm512_store_si512(o.w[s], v);
        }
        _mm512_store_si512(o.scale, scales(p));
        _mm512_store_si512(o.neg_corr, _mm512_sub_epi32(zero, corr));
        const float d1 = kSecond ? f16c_to_f32(x[1].d) : 0.0f;
        _mm512_store_ps(o.d, _mm512_mask_blend_ps(__mmask16(0xff00), _mm512_set1_ps(f16c_to_f32(x[0].d)),
                                                  _mm512_set1_ps(d1)));
    }
};

// The few-row form of a value: u = 43 + w in [0, 86] (w = +-8, 25 or 43), unsigned, so that
// vpdpbusd takes the activation a as its signed, memory operand, and the sum over a lane is
// sum u a = sum w a + 43 sum a, where 43 sum a depends on the activation alone (made once per
// call). u comes from one vpermb per step: its index holds the value's code and sign
// (few_indices), its table (few_table) maps them to 43 +- magnitude.

// One activation pair for the few-row path: the ActPair codes, -43 x each lane's code sum,
// and the d of every lane's block.
struct alignas(64) FewActPair {
    int8_t q[8][64];
    int32_t neg_bias[16];  // -43 x each lane's code sum: where the lane's integer starts
    float d[16];
};

// The four step indices of a pair (planes with few_signs), kFewSignBit's layouts: one
// vpternlogd (bit select, 0xE4: c ? a : b) each and three 16-bit shifts.
[[gnu::always_inline]] inline void few_indices(const PairDecoder::Planes& p, __m512i* index) {
    const __m512i sel0 = _mm512_set1_epi8(0x0f), sel1 = _mm512_set1_epi8(0x3c);
    const __m512i s2 = _mm512_srli_epi16(p.signs, 2);
    index[0] = _mm512_ternarylogic_epi32(p.plane[0], p.signs, sel0, 0xE4);
    index[1] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(p.plane[0], 2), p.signs, sel1, 0xE4);
    index[2] = _mm512_ternarylogic_epi32(p.plane[1], s2, sel0, 0xE4);
    index[3] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(p.plane[1], 2), s2, sel1, 0xE4);
}

// One pair of blocks against T activation rows (T = 1: decode and the one-row dot): the codes,
// signs and values are made once and applied to every row in registers, one vpdpbusd per step
// and row. Per row the integers are the pair lanes' of iq2_xxs_step_avx512.h (sum (43 + w) a
// - 43 sum a = sum w a, exactly), and so are the float operations: L = isum * (2l+1), then
// fma(float(L), d_a * d_w, acc) (the product of the two d's is the same single rounding either
// way round), so every row gets the lookup decoder's bits. A missing second block reads as
// zeros and its activation half is zero: sums 0.
template <bool kSecond, int T>
[[gnu::always_inline]] inline void few_pair(const PairDecoder& dec, const BlockIQ2_XXS* x,
                                            const FewActPair* a, __m512* acc) {
    const PairDecoder::Planes p = dec.planes<kSecond>(x, dec.few_signs);
    __m512i index[4];
    few_indices(p, index);
    // One or two rows alone would be chains of 8 dependent vpdpbusd: two per row (even, odd
    // steps), 1.07x for two rows; from three rows on the rows are chains enough.
    constexpr int C = T <= 2 ? 2 : 1;
    __m512i isum[C * T];
    for (int t = 0; t < C * T; ++t) isum[t] = t < T ? _mm512_load_si512(a[t].neg_bias) : _mm512_setzero_si512();
    for (int s = 0; s < 8; ++s) {
        const __m512i u = _mm512_permutexvar_epi8(index[s / 2], dec.few_table[(s / 2) % 2][s % 2]);
        for (int t = 0; t < T; ++t)
            isum[(s % C) * T + t] = _mm512_dpbusd_epi32(isum[(s % C) * T + t], u, _mm512_load_si512(a[t].q[s]));
    }
    if constexpr (C == 2) for (int t = 0; t < T; ++t) isum[t] = _mm512_add_epi32(isum[t], isum[T + t]);
    // float(L) = float(isum) * float(2l+1): both exact (|L| <= 32 * 43 * 128 * 31 < 2^24),
    // so the product is exact too and equals the integer product's convert.
    const __m512 scales = _mm512_permutexvar_ps(_mm512_srli_epi32(p.aux, 28), dec.odd_floats);
    // The two blocks' d as halves: lanes 0-7 the first block's, 8-15 the second's (or 0).
    __m256i dh = _mm256_set1_epi16(short(x[0].d));
    dh = _mm256_mask_set1_epi16(dh, __mmask16(0xff00), kSecond ? short(x[1].d) : short(0));
    const __m512 dw = _mm512_cvtph_ps(dh);
    for (int t = 0; t < T; ++t) {
        const __m512 L = _mm512_mul_ps(_mm512_cvtepi32_ps(isum[t]), scales);
        acc[t] = _mm512_fmadd_ps(L, _mm512_mul_ps(_mm512_load_ps(a[t].d), dw), acc[t]);
    }
}

// One weight row against T packed activations ([pair][T]): out[t] = the row's dot with row t.
template <int T>
[[gnu::always_inline]] inline void few_row(const PairDecoder& dec, int64_t nb, const BlockIQ2_XXS* x,
                                           const FewActPair* a, float* out) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) few_pair<true, T>(dec, x + b, a + (b / 2) * T, acc);
    if (b < nb) few_pair<false, T>(dec, x + b, a + (b / 2) * T, acc);
    for (int t = 0; t < T; ++t) out[t] = 0.125f * _mm512_reduce_add_ps(acc[t]);
}

// Every weight row against T packed activations, each row streamed once with prefetch.
template <int T>
void few_rows(const PairDecoder& dec, int64_t nb, const uint8_t* W, size_t w_stride, int64_t rows,
              const FewActPair* a, float* const* y) {
    StreamAhead ahead(W, W + size_t(rows - 1) * w_stride + size_t(nb) * sizeof(BlockIQ2_XXS));
    float out[T];
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = W + size_t(r) * w_stride;
        ahead.at(row);
        few_row<T>(dec, nb, reinterpret_cast<const BlockIQ2_XXS*>(row), a, out);
        for (int t = 0; t < T; ++t) y[t][r] = out[t];
    }
}

const PairDecoder& pair_decoder() {
    static const PairDecoder d;
    return d;
}

// n/256 Q8_K blocks in ActPair order: step s of a pair is value s of every point, two
// vpermt2b per step and block.
void order_pairs(int64_t nb, const BlockQ8_K* a, ActPair* out) {
    static const struct Pick {
        __m512i idx[8];  // for one block: byte i (< 32) <- value 32g + 8k + s of point i
        Pick() {
            alignas(64) uint8_t c[64];
            for (int s = 0; s < 8; ++s) {
                for (int i = 0; i < 64; ++i) c[i] = uint8_t(32 * ((i % 32) / 4) + 8 * (i % 4) + s);
                idx[s] = _mm512_load_si512(c);
            }
        }
    } pick;
    for (int64_t p = 0; p < (nb + 1) / 2; ++p) {
        for (int h = 0; h < 2; ++h) {
            const int64_t b = 2 * p + h;
            if (b >= nb) {
                for (int s = 0; s < 8; ++s) std::memset(out[p].q[s] + 32 * h, 0, 32);
                out[p].d[h] = 0.0f;
                continue;
            }
            // The block's 256 values as four registers; value v in register v / 64.
            const __m512i z0 = _mm512_loadu_si512(a[b].qs), z1 = _mm512_loadu_si512(a[b].qs + 64);
            const __m512i z2 = _mm512_loadu_si512(a[b].qs + 128), z3 = _mm512_loadu_si512(a[b].qs + 192);
            for (int s = 0; s < 8; ++s) {
                // Points 0-15 (groups 0-3) lie in values 0-127, points 16-31 in 128-255.
                const __m512i lo = _mm512_permutex2var_epi8(z0, pick.idx[s], z1);
                const __m512i hi = _mm512_permutex2var_epi8(z2, pick.idx[s], z3);
                const __m256i v = _mm512_castsi512_si256(_mm512_mask_blend_epi64(__mmask8(0x0C), lo, hi));
                _mm256_storeu_si256(reinterpret_cast<__m256i*>(out[p].q[s] + 32 * h), v);
            }
            out[p].d[h] = a[b].d;
        }
    }
}

std::vector<ActPair>& ordered_pairs(int64_t nb, const void* act) {
    thread_local std::vector<ActPair> ordered;
    if (ordered.size() < size_t((nb + 1) / 2)) ordered.resize(size_t((nb + 1) / 2));
    order_pairs(nb, static_cast<const BlockQ8_K*>(act), ordered.data());
    return ordered;
}

// n_act activations packed for few_row ([pair][n_act]), in a buffer of the calling thread.
const FewActPair* pack_few(int64_t nb, const void* const* act, int n_act) {
    const int64_t np = (nb + 1) / 2;
    thread_local std::vector<FewActPair> packed;
    if (packed.size() < size_t(np * n_act)) packed.resize(size_t(np * n_act));
    const __m512i c43 = _mm512_set1_epi8(43);
    for (int t = 0; t < n_act; ++t) {
        const auto& a = ordered_pairs(nb, act[t]);
        for (int64_t p = 0; p < np; ++p) {
            FewActPair& o = packed[size_t(p * n_act + t)];
            __m512i sum = _mm512_setzero_si512();
            for (int s = 0; s < 8; ++s) {
                const __m512i q = _mm512_load_si512(a[size_t(p)].q[s]);
                sum = _mm512_dpbusd_epi32(sum, c43, q);
                _mm512_store_si512(o.q[s], q);
            }
            _mm512_store_si512(o.neg_bias, _mm512_sub_epi32(_mm512_setzero_si512(), sum));
            _mm512_store_ps(o.d, _mm512_mask_blend_ps(__mmask16(0xff00), _mm512_set1_ps(a[size_t(p)].d[0]),
                                                      _mm512_set1_ps(a[size_t(p)].d[1])));
        }
    }
    return packed.data();
}
}  // namespace

float dot_iq2_xxs_q8_k_vbmi(int64_t n, const void* w, const void* act) {
    const int64_t nb = n / kQK_K;
    float out[1];
    few_row<1>(pair_decoder(), nb, static_cast<const BlockIQ2_XXS*>(w), pack_few(nb, &act, 1), out);
    return out[0];
}

void iq2xxs_rows_vbmi(int64_t nb, const void* W, size_t w_stride, int64_t rows, const void* act, float* y) {
    if (rows > 0) few_rows<1>(pair_decoder(), nb, static_cast<const uint8_t*>(W), w_stride, rows, pack_few(nb, &act, 1), &y);
}

void iq2xxs_few_rows_vbmi(int64_t nb, const void* W, size_t w_stride, int64_t rows, const void* const* act,
                          int n_act, float* const* y) {
    if (rows <= 0 || n_act <= 0 || n_act > kIq2xxsFewRowsMax) return;
    const FewActPair* packed = pack_few(nb, act, n_act);
    const PairDecoder& dec = pair_decoder();
    const auto* base = static_cast<const uint8_t*>(W);
    [&]<int... I>(std::integer_sequence<int, I...>) {
        ((n_act == I + 1 ? few_rows<I + 1>(dec, nb, base, w_stride, rows, packed, y) : void()), ...);
    }(std::make_integer_sequence<int, kIq2xxsFewRowsMax>{});
}

void iq2xxs_few_values_vbmi(const void* pair, uint8_t (*u)[64]) {
    const PairDecoder& dec = pair_decoder();
    const PairDecoder::Planes p = dec.planes<true>(static_cast<const BlockIQ2_XXS*>(pair), dec.few_signs);
    __m512i index[4];
    few_indices(p, index);
    for (int s = 0; s < 8; ++s)
        _mm512_storeu_si512(u[s], _mm512_permutexvar_epi8(index[s / 2], dec.few_table[(s / 2) % 2][s % 2]));
}

void iq2xxs_decode_row_vbmi(int64_t nb, const void* row, Iq2xxsDecodedPair* out) {
    const PairDecoder& dec = pair_decoder();
    const auto* x = static_cast<const BlockIQ2_XXS*>(row);
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) dec.decode<true>(x + b, out[b / 2]);
    if (b < nb) dec.decode<false>(x + b, out[b / 2]);
}

void iq2xxs_pack_act_vbmi(int64_t nb, const void* act, int m, int t, uint8_t* codes, float* d) {
    const auto& a = ordered_pairs(nb, act);
    const __m512i bias = _mm512_set1_epi8(char(0x80));
    for (int64_t p = 0; p < (nb + 1) / 2; ++p) {
        for (int s = 0; s < 8; ++s)
            _mm512_storeu_si512(codes + size_t(((p * 8 + s) * m + t) * 64),
                                _mm512_xor_si512(_mm512_load_si512(a[size_t(p)].q[s]), bias));
        _mm512_storeu_ps(d + size_t((p * m + t) * 16),
                         _mm512_mask_blend_ps(__mmask16(0xff00), _mm512_set1_ps(a[size_t(p)].d[0]),
                                              _mm512_set1_ps(a[size_t(p)].d[1])));
    }
}

}  // namespace ds4::quant

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
