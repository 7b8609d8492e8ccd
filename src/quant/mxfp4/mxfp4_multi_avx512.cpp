// Multi-row MXFP4 x Q8_0 dots, AVX-512 VNNI: mxfp4_avx512.cpp's arithmetic per activation row
// (two blocks per zmm, table magnitudes with vpdpbusd, sign moved onto the activation, 8
// scales per product vector, a pair tail and a scalar last block), with the code unpacking,
// magnitudes, sign masks and exponents done once per tile. The activations' f16 scales are
// converted once per call (exactly, so each scale product is the same float).
#include "quant/x86_simd.h"  // first: see there

#include <vector>

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"
#include "quant/mxfp4/mxfp4.h"

namespace ds4::quant {
namespace {

inline __m512i load_act_pair(const BlockQ8_0* p) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[0].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[1].qs)), 1);
}

inline float e8m0_half(uint8_t e) {  // 2^(e-128), see mxfp4_scale()
    const uint32_t bits = e >= 2 ? uint32_t(e - 1) << 23 : 0x00200000u << e;
    float f;
    __builtin_memcpy(&f, &bits, 4);
    return f;
}

// 2^(e-128) of 8 consecutive blocks.
inline __m256 exps8(const BlockMXFP4* x) {
    __m128i e = _mm_cvtsi32_si128(x[0].e);
    e = _mm_insert_epi8(e, x[1].e, 1);
    e = _mm_insert_epi8(e, x[2].e, 2);
    e = _mm_insert_epi8(e, x[3].e, 3);
    e = _mm_insert_epi8(e, x[4].e, 4);
    e = _mm_insert_epi8(e, x[5].e, 5);
    e = _mm_insert_epi8(e, x[6].e, 6);
    e = _mm_insert_epi8(e, x[7].e, 7);
    const __m256i e32 = _mm256_cvtepu8_epi32(e);
    const __m256i normal = _mm256_slli_epi32(_mm256_sub_epi32(e32, _mm256_set1_epi32(1)), 23);
    const __m256i subnormal = _mm256_sllv_epi32(_mm256_set1_epi32(0x00200000), e32);
    return _mm256_castsi256_ps(_mm256_mask_mov_epi32(
        normal, _mm256_cmplt_epu32_mask(e32, _mm256_set1_epi32(2)), subnormal));
}

// Magnitudes and sign mask of a pair of weight blocks, lined up with the activation bytes.
struct WeightPair {
    __m512i mag;
    __mmask64 neg;
};

struct Kernel {
    int64_t nb;
    const BlockQ8_0* const* act;
    const float* ascale;  // [n_act][nb] activation scales as f32
    __m512i magnitudes, shifts, m4, sign_bit;

    WeightPair weight_pair(const BlockMXFP4* x) const {
        const __m256i q0 = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[0].qs)));
        const __m256i q1 = _mm256_broadcastsi128_si256(
            _mm_loadu_si128(reinterpret_cast<const __m128i*>(x[1].qs)));
        const __m512i q = _mm512_inserti64x4(_mm512_castsi256_si512(q0), q1, 1);
        const __m512i codes = _mm512_and_si512(_mm512_srlv_epi16(q, shifts), m4);
        return {_mm512_shuffle_epi8(magnitudes, codes), _mm512_test_epi8_mask(codes, sign_bit)};
    }

    static __m512i products(const WeightPair& w, const BlockQ8_0* y) {
        const __m512i zero = _mm512_setzero_si512();
        const __m512i a = load_act_pair(y);
        return _mm512_dpbusd_epi32(zero, w.mag, _mm512_mask_sub_epi8(a, w.neg, zero, a));
    }

    template <int T>
    void tile(const uint8_t* wp, int64_t t0, float* out) const {
        const auto* x = reinterpret_cast<const BlockMXFP4*>(wp);
        const BlockQ8_0* y[T];
        const float* ys[T];
        for (int t = 0; t < T; ++t) {
            y[t] = act[t0 + t];
            ys[t] = ascale + (t0 + t) * nb;
        }
        const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        __m512 acc0[T], acc1[T];
        for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            const __m256 we = exps8(x + b);
            __m512 s[T];
            for (int t = 0; t < T; ++t)
                s[t] = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_loadu_ps(ys[t] + b), we));
            for (int k = 0; k < 8; k += 4) {
                const WeightPair w0 = weight_pair(x + b + k), w1 = weight_pair(x + b + k + 2);
                const __m512i pick0 = _mm512_add_epi32(pick, _mm512_set1_epi32(k));
                const __m512i pick1 = _mm512_add_epi32(pick, _mm512_set1_epi32(k + 2));
                for (int t = 0; t < T; ++t) {
                    const __m512i p0 = products(w0, y[t] + b + k);
                    const __m512i p1 = products(w1, y[t] + b + k + 2);
                    acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0),
                                              _mm512_permutexvar_ps(pick0, s[t]), acc0[t]);
                    acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1),
                                              _mm512_permutexvar_ps(pick1, s[t]), acc1[t]);
                }
            }
        }
        for (; b + 2 <= nb; b += 2) {
            const WeightPair w = weight_pair(x + b);
            const float e0 = e8m0_half(x[b].e), e1 = e8m0_half(x[b + 1].e);
            for (int t = 0; t < T; ++t) {
                const __m512 s = _mm512_insertf32x8(_mm512_set1_ps(ys[t][b] * e0),
                                                    _mm256_set1_ps(ys[t][b + 1] * e1), 1);
                acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(products(w, y[t] + b)), s, acc0[t]);
            }
        }
        for (int t = 0; t < T; ++t) out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t]));
        if (b < nb) {
            const float e = e8m0_half(x[b].e);
            for (int t = 0; t < T; ++t) {
                int sumi = 0;
                for (int j = 0; j < kQK_MXFP4 / 2; ++j) {
                    sumi += kMxfp4Values[x[b].qs[j] & 15] * y[t][b].qs[j];
                    sumi += kMxfp4Values[x[b].qs[j] >> 4] * y[t][b].qs[j + 16];
                }
                out[t] += float(sumi) * (ys[t][b] * e);
            }
        }
    }
};

}  // namespace

void multi_mxfp4_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                        const void* const* act, int64_t n_act, float* const* y) {
    const int64_t nb = n / kQK_MXFP4;
    thread_local std::vector<float> ascale;
    ascale.resize(size_t(n_act * nb));
    for (int64_t t = 0; t < n_act; ++t) {
        const auto* a = static_cast<const BlockQ8_0*>(act[t]);
        for (int64_t b = 0; b < nb; ++b) ascale[size_t(t * nb + b)] = _cvtsh_ss(a[b].d);
    }
    Kernel k{nb, reinterpret_cast<const BlockQ8_0* const*>(act), ascale.data(), {}, {}, {}, {}};
    k.magnitudes =
        _mm512_broadcast_i32x4(_mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, 1, 2, 3, 4, 6, 8, 12));
    k.shifts = _mm512_setr_epi64(0, 0, 0x0004000400040004, 0x0004000400040004, 0, 0,
                                 0x0004000400040004, 0x0004000400040004);
    k.m4 = _mm512_set1_epi8(0x0f);
    k.sign_bit = _mm512_set1_epi8(0x08);
    run_tiles<4>(k, W, w_stride, rows, n_act, y);
}

}  // namespace ds4::quant
