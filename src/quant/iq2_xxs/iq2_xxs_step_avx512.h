// The IQ2_XXS AVX-512 kernels' shared parts (include only from *_avx512.cpp, after
// x86_simd.h).
//
// Pair lanes: the sums go in pairs of blocks (2i, 2i+1; an odd last block pairs with an empty
// one), i32 lane l holding group l % 8 of block 2i + l / 8. Per pair and lane the integer is
// exact:
//   L_l = (2l+1 of the group) * sum of its 32 products w * a,
// then acc_l += float(L_l) * (d_a * d_w of the lane's block), and the result is 1/8 of the
// lanes' sum. Every AVX-512 kernel (one row, many rows, either decoder) forms exactly these
// lanes in this order, so all give the same bits; they differ from the scalar kernel only in
// float order.
//
// Two decoders: the AVX512-VBMI one (iq2_xxs_vbmi_avx512.cpp) works on pairs of blocks in pair
// lanes from the start. The lookup decoder here (eight 8-byte codebook loads per step, sign
// bytes from a table) works on a block as four steps of 64 values, chunk k of each of the
// block's 8 groups in step k, group g in bytes 8g..8g+7, so i32 lanes 2g and 2g+1 hold two
// halves of group g in every step and vpdpbusd accumulates the four steps in one register;
// the activation is put in the same order once per call (Iq2xxsActBlock). Its one-row kernel
// adds the half-group lanes of two blocks into pair lanes (two vpermt2d and an add per pair);
// the multi-row kernel decodes and packs straight into pair lanes (either decoder), so its
// inner loop pays one convert, multiply and FMA per two blocks and token.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "quant/blocks.h"
#include "quant/iq2_xxs/iq2_xxs.h"
#include "quant/iq2_xxs/iq2_xxs_grid.h"
#include "quant/prefetch.h"

namespace ds4::quant {

// A Q8_K activation block in step order: q[k][8g + j] = qs[32g + 8k + j].
struct alignas(64) Iq2xxsActBlock {
    int8_t q[4][64];
    float d;
};

// Two IQ2_XXS blocks decoded for the multi-row kernel, in pair lanes: w[j] holds four signed
// values of every lane's group (the lookup decoder: values 4j..4j+3; the VBMI one: value j of
// each of the group's four chunks), then per lane the group's 2l+1, minus the weight-only term
// of the a + 128 activation packing (-128 * the lane's weight sum), and the block's d (0 in
// the empty half of an odd last pair). The activation packing follows the decoder's order.
struct alignas(64) Iq2xxsDecodedPair {
    int8_t w[8][64];
    int32_t scale[16];
    int32_t neg_corr[16];
    float d[16];
};

namespace {

struct Iq2xxsSteps {
    __m512i mag[4];     // 64 unsigned magnitudes (8, 25 or 43) per step
    __mmask64 neg[4];   // values whose sign is negative
};

// Puts n/256 Q8_K blocks in the lookup decoder's step order (once per call; shared by every
// weight row): q[k][8g + j] = qs[32g + 8k + j].
inline void iq2xxs_order_act(int64_t nb, const BlockQ8_K* a, Iq2xxsActBlock* out) {
    for (int64_t b = 0; b < nb; ++b) {
        for (int k = 0; k < 4; ++k)
            for (int g = 0; g < 8; ++g) std::memcpy(out[b].q[k] + 8 * g, a[b].qs + 32 * g + 8 * k, 8);
        out[b].d = a[b].d;
    }
}

// The 2l+1 of every group of blocks x[0] and x[1] (1 for the missing second block of an odd
// last pair) in pair lanes: l is the top 4 bits of the group's aux dword (dword 2g+1 of the
// block's 64 code bytes), and (aux >> 27) | 1 = 2l+1. One vpermt2d per pair.
inline __m512i iq2xxs_pair_scales(const BlockIQ2_XXS* x, bool has_second) {
    const __m512i a = _mm512_loadu_si512(x[0].qs);
    const __m512i b = has_second ? _mm512_loadu_si512(x[1].qs) : _mm512_setzero_si512();
    const __m512i aux = _mm512_permutex2var_epi32(
        a, _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31), b);
    return _mm512_or_si512(_mm512_srli_epi32(aux, 27), _mm512_set1_epi32(1));
}

// Pair lanes from two step-lane registers a (block 2i) and b (block 2i+1): lanes 0-7 take
// dwords 2g + h of a, lanes 8-15 the same of b (h = 0: first halves, 1: second halves).
inline __m512i iq2xxs_pair_pick(__m512i a, __m512i b, int h) {
    const __m512i idx = _mm512_add_epi32(
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30), _mm512_set1_epi32(h));
    return _mm512_permutex2var_epi32(a, idx, b);
}

// Whole-group sums in pair lanes from the half-group lanes of two blocks.
inline __m512i iq2xxs_pair_sum(__m512i a, __m512i b) {
    return _mm512_add_epi32(iq2xxs_pair_pick(a, b, 0), iq2xxs_pair_pick(a, b, 1));
}

struct Iq2xxsLookupDecoder {
    void block(const BlockIQ2_XXS& x, Iq2xxsSteps& st) const {
        uint32_t idx[8], aux[8];
        for (int g = 0; g < 8; ++g) {
            std::memcpy(&idx[g], x.qs + 4 * g, 4);
            std::memcpy(&aux[g], x.qs + 4 * g + 2, 4);
        }
        const uint64_t* grid = kIq2xxsGrid;
        for (int k = 0; k < 4; ++k) {
            const int sh = 8 * k;
            st.mag[k] = _mm512_set_epi64(
                int64_t(grid[(idx[7] >> sh) & 255]), int64_t(grid[(idx[6] >> sh) & 255]),
                int64_t(grid[(idx[5] >> sh) & 255]), int64_t(grid[(idx[4] >> sh) & 255]),
                int64_t(grid[(idx[3] >> sh) & 255]), int64_t(grid[(idx[2] >> sh) & 255]),
                int64_t(grid[(idx[1] >> sh) & 255]), int64_t(grid[(idx[0] >> sh) & 255]));
            uint64_t m = 0;
            for (int g = 0; g < 8; ++g) m |= uint64_t(kIq2xxsSignMasks[(aux[g] >> (7 * k)) & 127]) << (8 * g);
            st.neg[k] = _cvtu64_mask64(m);
        }
    }
};

// One weight row against one activation in step order: per step a masked subtract negates
// activation bytes and vpdpbusd (u8 magnitude <= 43 x s8) accumulates the half-group lanes;
// two blocks' half-group lanes are added into pair lanes, then the 2l+1 applied (integers,
// so the same L_l as scaling each half first).
// Always inlined: a call per block would reload the decoder's tables from memory.
template <class Dec>
[[gnu::always_inline]] inline __m512i iq2xxs_block_sums(const Dec& dec, const BlockIQ2_XXS& x, const Iq2xxsActBlock& a) {
    const __m512i zero = _mm512_setzero_si512();
    Iq2xxsSteps st;
    dec.block(x, st);
    __m512i isum = zero;
    for (int k = 0; k < 4; ++k) {
        const __m512i q = _mm512_load_si512(a.q[k]);
        isum = _mm512_dpbusd_epi32(isum, st.mag[k], _mm512_mask_sub_epi8(q, st.neg[k], zero, q));
    }
    return isum;
}

template <bool kSecond, class Dec>
[[gnu::always_inline]] inline __m512 iq2xxs_pair_step(const Dec& dec, const BlockIQ2_XXS* x, const Iq2xxsActBlock* a, __m512 acc) {
    const __m512i s0 = iq2xxs_block_sums(dec, x[0], a[0]);
    const __m512i s1 = kSecond ? iq2xxs_block_sums(dec, x[1], a[1]) : _mm512_setzero_si512();
    const float d0 = a[0].d * f16c_to_f32(x[0].d);
    const float d1 = kSecond ? a[1].d * f16c_to_f32(x[1].d) : 0.0f;
    const __m512i L = _mm512_mullo_epi32(iq2xxs_pair_sum(s0, s1), iq2xxs_pair_scales(x, kSecond));
    const __m512 dv = _mm512_mask_blend_ps(__mmask16(0xff00), _mm512_set1_ps(d0), _mm512_set1_ps(d1));
    return _mm512_fmadd_ps(_mm512_cvtepi32_ps(L), dv, acc);
}

template <class Dec>
inline float iq2xxs_dot_ordered(const Dec& dec, int64_t nb, const BlockIQ2_XXS* x,
                                const Iq2xxsActBlock* a) {
    __m512 acc = _mm512_setzero_ps();
    int64_t b = 0;
    for (; b + 1 < nb; b += 2) acc = iq2xxs_pair_step<true>(dec, x + b, a + b, acc);
    if (b < nb) acc = iq2xxs_pair_step<false>(dec, x + b, a + b, acc);
    return 0.125f * _mm512_reduce_add_ps(acc);
}

// Every row of W against one activation in step order, prefetching ahead (quant/prefetch.h).
template <class Dec>
inline void iq2xxs_rows_ordered(const Dec& dec, int64_t nb, const uint8_t* W, size_t w_stride,
                                int64_t rows, const Iq2xxsActBlock* a, float* y) {
    if (rows <= 0) return;
    StreamAhead ahead(W, W + size_t(rows - 1) * w_stride + size_t(nb) * sizeof(BlockIQ2_XXS));
    for (int64_t r = 0; r < rows; ++r) {
        const uint8_t* row = W + size_t(r) * w_stride;
        ahead.at(row);
        y[r] = iq2xxs_dot_ordered(dec, nb, reinterpret_cast<const BlockIQ2_XXS*>(row), a);
    }
}

// The multi-row kernel (iq2_xxs_multi_avx512.cpp) decodes each weight row once into pairs
// (in L1), then runs every tile of activation rows over them.
template <class Dec>
inline void iq2xxs_decode_row(const Dec& dec, int64_t nb, const BlockIQ2_XXS* x,
                              Iq2xxsDecodedPair* out) {
    const __m512i zero = _mm512_setzero_si512(), bias = _mm512_set1_epi8(char(0x80));
    for (int64_t b = 0; b < nb; b += 2) {
        __m512i w[2][4];
        float d[2] = {0.0f, 0.0f};
        for (int i = 0; i < 2; ++i) {
            if (b + i >= nb) {
                for (int k = 0; k < 4; ++k) w[i][k] = zero;
                continue;
            }
            Iq2xxsSteps st;
            dec.block(x[b + i], st);
            for (int k = 0; k < 4; ++k) w[i][k] = _mm512_mask_sub_epi8(st.mag[k], st.neg[k], zero, st.mag[k]);
            d[i] = f16c_to_f32(x[b + i].d);
        }
        Iq2xxsDecodedPair& o = out[b / 2];
        __m512i corr = zero;
        for (int k = 0; k < 4; ++k)
            for (int h = 0; h < 2; ++h) {
                const __m512i v = iq2xxs_pair_pick(w[0][k], w[1][k], h);
                corr = _mm512_dpbusd_epi32(corr, bias, v);
                _mm512_store_si512(o.w[2 * k + h], v);
            }
        _mm512_store_si512(o.scale, iq2xxs_pair_scales(x + b, b + 1 < nb));
        _mm512_store_si512(o.neg_corr, _mm512_sub_epi32(zero, corr));
        _mm512_store_ps(o.d, _mm512_mask_blend_ps(__mmask16(0xff00), _mm512_set1_ps(d[0]), _mm512_set1_ps(d[1])));
    }
}

// Activation blocks b and b + 1 (in step order; b + 1 may be missing) packed for the tile:
// codes[j] the pair-lane register j as unsigned bytes a + 128, d the lanes' block d.
inline void iq2xxs_pack_pair(const Iq2xxsActBlock* a, bool has_second, uint8_t* const* codes, float* d) {
    const __m512i zero = _mm512_setzero_si512(), bias = _mm512_set1_epi8(char(0x80));
    for (int k = 0; k < 4; ++k) {
        const __m512i q0 = _mm512_load_si512(a[0].q[k]);
        const __m512i q1 = has_second ? _mm512_load_si512(a[1].q[k]) : zero;
        for (int h = 0; h < 2; ++h)
            _mm512_storeu_si512(codes[2 * k + h], _mm512_xor_si512(iq2xxs_pair_pick(q0, q1, h), bias));
    }
    _mm512_storeu_ps(d, _mm512_mask_blend_ps(__mmask16(0xff00), _mm512_set1_ps(a[0].d),
                                             _mm512_set1_ps(has_second ? a[1].d : 0.0f)));
}

// A packed tile of T activation rows: codes [pairs * 8 registers][T][64] as unsigned bytes
// a + 128 in pair lanes, lane scales [pairs][T][16]. Starting each lane from the pair's
// -128 * (weight sum), eight vpdpbusd leave the same integers as iq2xxs_dot_ordered's.
template <int T>
inline void iq2xxs_tile_pairs(int64_t np, const Iq2xxsDecodedPair* xd, const uint8_t* pa,
                              const float* pd, float* out) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t p = 0; p < np; ++p, pa += 8 * T * 64, pd += T * 16) {
        const __m512i neg_corr = _mm512_load_si512(xd[p].neg_corr);
        __m512i s0[T], s1[T];
        for (int t = 0; t < T; ++t) s0[t] = neg_corr, s1[t] = _mm512_setzero_si512();
        for (int j = 0; j < 8; j += 2) {
            const __m512i w0 = _mm512_load_si512(xd[p].w[j]), w1 = _mm512_load_si512(xd[p].w[j + 1]);
            for (int t = 0; t < T; ++t) {
                s0[t] = _mm512_dpbusd_epi32(s0[t], _mm512_loadu_si512(pa + (j * T + t) * 64), w0);
                s1[t] = _mm512_dpbusd_epi32(s1[t], _mm512_loadu_si512(pa + ((j + 1) * T + t) * 64), w1);
            }
        }
        const __m512i scale = _mm512_load_si512(xd[p].scale);
        const __m512 dw = _mm512_load_ps(xd[p].d);
        for (int t = 0; t < T; ++t)
            acc[t] = _mm512_fmadd_ps(
                _mm512_cvtepi32_ps(_mm512_mullo_epi32(_mm512_add_epi32(s0[t], s1[t]), scale)),
                _mm512_mul_ps(dw, _mm512_loadu_ps(pd + t * 16)), acc[t]);
    }
    for (int t = 0; t < T; ++t) out[t] = 0.125f * _mm512_reduce_add_ps(acc[t]);
}

}  // namespace
}  // namespace ds4::quant
