// The IQ2_XXS AVX-512 kernels' shared parts (include only from *_avx512.cpp, after
// x86_simd.h).
//
// Group lanes: the AVX-512 kernels work on a block as four steps of 64 values, step k holding
// chunk k (values 8k..8k+7) of each of the block's 8 groups, group g in bytes 8g..8g+7. So i32
// lanes 2g and 2g+1 belong to group g in every step: vpdpbusd accumulates the four steps in one
// register, and one vpmulld applies the groups' 2l+1 per block (instead of a vpmaddubsw and a
// vpdpwssd with the scales per step). The activation is put in the same order once per call
// (Iq2xxsActBlock). Per block and lane the integer is exact:
//   L_i = (2l+1 of group i/2) * sum of its 16 products w * a,
// then acc_i += (d_a * d_w) * float(L_i), and the result is 1/8 of the lanes' sum. Every
// AVX-512 kernel (one row, many rows, either decoder) forms exactly these lanes in this
// order, so all give the same bits; they differ from the scalar kernel only in float order.
//
// Decoders make a block's steps: Iq2xxsLookupDecoder here (eight 8-byte codebook loads per
// step, sign bytes from a table), and the AVX512-VBMI one in iq2_xxs_vbmi_avx512.cpp.
#pragma once

#include <cstdint>
#include <cstring>
#include <utility>

#include "quant/blocks.h"
#include "quant/iq2_xxs.h"
#include "quant/iq2_xxs_grid.h"
#include "quant/prefetch.h"

namespace ds4::quant {

// A Q8_K activation block in step order: q[k][8g + j] = qs[32g + 8k + j].
struct alignas(64) Iq2xxsActBlock {
    int8_t q[4][64];
    float d;
};

// One IQ2_XXS block decoded for the multi-row kernel: the signed weights per step, the
// groups' 2l+1 per lane, minus the weight-only term of the a + 128 activation packing
// (-128 * the lane's weight sum), and d.
struct alignas(64) Iq2xxsDecodedBlock {
    int8_t w[4][64];
    int32_t scale[16];
    int32_t neg_corr[16];
    float d;
};

namespace {

struct Iq2xxsSteps {
    __m512i mag[4];     // 64 unsigned magnitudes (8, 25 or 43) per step
    __mmask64 neg[4];   // values whose sign is negative
    __m512i scale;      // dword i: 2l+1 of group i/2
};

// Puts n/256 Q8_K blocks in step order (once per call; shared by every weight row).
inline void iq2xxs_order_act(int64_t nb, const BlockQ8_K* a, Iq2xxsActBlock* out) {
    for (int64_t b = 0; b < nb; ++b) {
        for (int k = 0; k < 4; ++k)
            for (int g = 0; g < 8; ++g) std::memcpy(out[b].q[k] + 8 * g, a[b].qs + 32 * g + 8 * k, 8);
        out[b].d = a[b].d;
    }
}

// The 2l+1 of every group (the top 4 bits of its aux dword, dword 2g+1 of the block's 64 code
// bytes) in lanes 2g and 2g+1.
inline __m512i iq2xxs_lane_scales(__m512i codes) {
    const __m512i aux = _mm512_permutexvar_epi32(
        _mm512_setr_epi32(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15), codes);
    return _mm512_or_si512(_mm512_slli_epi32(_mm512_srli_epi32(aux, 28), 1), _mm512_set1_epi32(1));
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
        st.scale = iq2xxs_lane_scales(_mm512_loadu_si512(x.qs));
    }
};

// One weight row against one activation in step order: per step a masked subtract negates
// activation bytes and vpdpbusd (u8 magnitude <= 43 x s8) accumulates the lanes.
template <class Dec>
inline float iq2xxs_dot_ordered(const Dec& dec, int64_t nb, const BlockIQ2_XXS* x,
                                const Iq2xxsActBlock* a) {
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        Iq2xxsSteps st;
        dec.block(x[b], st);
        __m512i isum = zero;
        for (int k = 0; k < 4; ++k) {
            const __m512i q = _mm512_load_si512(a[b].q[k]);
            isum = _mm512_dpbusd_epi32(isum, st.mag[k], _mm512_mask_sub_epi8(q, st.neg[k], zero, q));
        }
        const float d = a[b].d * f16c_to_f32(x[b].d);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(_mm512_mullo_epi32(isum, st.scale)),
                              acc);
    }
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

// The multi-row kernel (iq2_xxs_multi_avx512.cpp) decodes each weight row once into these
// blocks (in L1), then runs every tile of activation rows over them.
template <class Dec>
inline void iq2xxs_decode_row(const Dec& dec, int64_t nb, const BlockIQ2_XXS* x,
                              Iq2xxsDecodedBlock* out) {
    const __m512i zero = _mm512_setzero_si512(), bias = _mm512_set1_epi8(char(0x80));
    for (int64_t b = 0; b < nb; ++b) {
        Iq2xxsSteps st;
        dec.block(x[b], st);
        __m512i corr = zero;
        for (int k = 0; k < 4; ++k) {
            const __m512i w = _mm512_mask_sub_epi8(st.mag[k], st.neg[k], zero, st.mag[k]);
            corr = _mm512_dpbusd_epi32(corr, bias, w);
            _mm512_store_si512(out[b].w[k], w);
        }
        _mm512_store_si512(out[b].scale, st.scale);
        _mm512_store_si512(out[b].neg_corr, _mm512_sub_epi32(zero, corr));
        out[b].d = f16c_to_f32(x[b].d);
    }
}

// A packed tile of T activation rows: codes [nb*4 steps][T][64] as unsigned bytes a + 128 in
// step order, block scales [nb][T]. Starting each lane from the block's -128 * (weight sum),
// four vpdpbusd leave the same integers as iq2xxs_dot_ordered's.
template <int T>
inline void iq2xxs_tile_decoded(int64_t nb, const Iq2xxsDecodedBlock* xd, const uint8_t* pa,
                                const float* ad, float* out) {
    __m512 acc[T];
    for (int t = 0; t < T; ++t) acc[t] = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        const __m512i neg_corr = _mm512_load_si512(xd[b].neg_corr);
        __m512i isum[T];
        for (int t = 0; t < T; ++t) isum[t] = neg_corr;
        for (int k = 0; k < 4; ++k, pa += T * 64) {
            const __m512i w = _mm512_load_si512(xd[b].w[k]);
            for (int t = 0; t < T; ++t)
                isum[t] = _mm512_dpbusd_epi32(isum[t], _mm512_loadu_si512(pa + t * 64), w);
        }
        const __m512i scale = _mm512_load_si512(xd[b].scale);
        for (int t = 0; t < T; ++t)
            acc[t] = _mm512_fmadd_ps(_mm512_set1_ps(ad[b * T + t] * xd[b].d),
                                     _mm512_cvtepi32_ps(_mm512_mullo_epi32(isum[t], scale)), acc[t]);
    }
    for (int t = 0; t < T; ++t) out[t] = 0.125f * _mm512_reduce_add_ps(acc[t]);
}

}  // namespace
}  // namespace ds4::quant
