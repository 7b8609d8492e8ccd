// Q2_K x Q8_K dot, AVX-512 VNNI. Per block the 16 group scales become a vpshufb table: 128-bit
// lane L holds, in dword j, the bytes 0, s, 2s, 3s of scale s = scales[4j + L] (one vpshufb,
// one and, one vpmullw of the words s, s by 0x0100, 0x0302). Each 32-byte code load is
// broadcast to both halves of a zmm and shifted by two different amounts (vpsrlvw), giving 64
// codes that line up with 64 consecutive activations; one vpternlogd keeps the 2-bit code c and
// adds 4j, so vpshufb turns it into c * s (<= 45) and vpdpbusd multiplies by the activations
// and accumulates in i32: one multiply per 64 values instead of vpmaddubsw + vpdpwssd. The i32
// lanes are the same integers as before (the group's scale times four products).
//
// q2_k_rows_avx512 runs the same dot over consecutive rows (decode's one-activation products),
// without a call through a pointer and the constants' set-up per row: the expert down
// projections have 2048 columns, only 8 blocks a row (+5% there, 2048 columns, one thread).
#include "quant/x86_simd.h"  // first: see there

#include "quant/prefetch.h"
#include "quant/q2_k/q2_k.h"

namespace ds4::quant {
namespace {

struct Q2KConstants {
    __m512i m3 = _mm512_set1_epi8(3);
    __m128i m15 = _mm_set1_epi8(15);
    __m512i m15z = _mm512_set1_epi8(15);
    __m512i times0123 = _mm512_set1_epi32(0x03020100);
    // Shift counts for bit pairs (0,1) and (2,3): low 256 bits / high 256 bits.
    __m512i shift01 = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    __m512i shift23 = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(6), 1);
    // pick: lane L, dword j <- scale byte 4j + L in both words (the other bytes zero).
    __m512i pick;
    // table[j]: 4j in every byte, the table dword that code register j looks up.
    __m512i table[4];
    Q2KConstants() {
        alignas(64) int8_t ctl[64];
        for (int i = 0; i < 64; ++i) ctl[i] = int8_t(i % 2 ? 0x80 : 4 * ((i % 16) / 4) + i / 16);
        pick = _mm512_load_si512(ctl);
        for (int j = 0; j < 4; ++j) table[j] = _mm512_set1_epi8(char(4 * j));
    }
};

// One row of nb blocks (always inlined: the rows loop keeps the constants in registers).
[[gnu::always_inline]] inline float q2_k_row(const Q2KConstants& c, int64_t nb, const BlockQ2_K* x,
                                             const BlockQ8_K* a) {
    __m512 acc = _mm512_setzero_ps();
    __m256 acc_min = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; ++b) {
        // The weights come once from DRAM in decode: ask for them ahead (quant/prefetch.h),
        // two lines per 84-byte block.
        const char* ahead = reinterpret_cast<const char*>(x + b) + kPrefetchAhead;
        _mm_prefetch(ahead, _MM_HINT_T0);
        _mm_prefetch(ahead + 64, _MM_HINT_T0);
        const __m128i sm = _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[b].scales));
        const __m256i mins = _mm256_cvtepu8_epi16(_mm_and_si128(_mm_srli_epi16(sm, 4), c.m15));
        const __m256i msum = _mm256_madd_epi16(
            mins, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].bsums)));
        // Lane L, dword j: bytes 0, s, 2s, 3s of s = scales[4j + L] (low nibbles).
        const __m512i words = _mm512_and_si512(_mm512_shuffle_epi8(_mm512_broadcast_i32x4(sm), c.pick), c.m15z);
        const __m512i times = _mm512_mullo_epi16(words, c.times0123);
        const int8_t* q8 = a[b].qs;
        __m512i isum = _mm512_setzero_si512();
        for (int half = 0; half < 2; ++half) {
            const __m512i bits = _mm512_broadcast_i64x4(
                _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs + 32 * half)));
            for (int k = 0; k < 2; ++k) {
                // (bits >> shift) & 3 | 4j: code c of register j = 2 half + k, looked up as c * s.
                const __m512i idx = _mm512_ternarylogic_epi32(
                    _mm512_srlv_epi16(bits, k ? c.shift23 : c.shift01), c.m3, c.table[2 * half + k], 0xEA);
                const __m512i q = _mm512_loadu_si512(q8);
                q8 += 64;
                isum = _mm512_dpbusd_epi32(isum, _mm512_shuffle_epi8(times, idx), q);
            }
        }
        const float d = a[b].d * f16c_to_f32(x[b].d), dmin = a[b].d * f16c_to_f32(x[b].dmin);
        acc = _mm512_fmadd_ps(_mm512_set1_ps(d), _mm512_cvtepi32_ps(isum), acc);
        acc_min = _mm256_fmadd_ps(_mm256_set1_ps(dmin), _mm256_cvtepi32_ps(msum), acc_min);
    }
    return _mm512_reduce_add_ps(acc) - hsum_ps(acc_min);
}

}  // namespace

float dot_q2_k_q8_k_avx512(int64_t n, const void* w, const void* act) {
    const Q2KConstants c;
    return q2_k_row(c, n / kQK_K, static_cast<const BlockQ2_K*>(w), static_cast<const BlockQ8_K*>(act));
}

void q2_k_rows_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows, const void* act, float* y) {
    const Q2KConstants c;
    const auto* base = static_cast<const uint8_t*>(W);
    const auto* a = static_cast<const BlockQ8_K*>(act);
    for (int64_t r = 0; r < rows; ++r)
        y[r] = q2_k_row(c, n / kQK_K, reinterpret_cast<const BlockQ2_K*>(base + size_t(r) * w_stride), a);
}

}  // namespace ds4::quant
