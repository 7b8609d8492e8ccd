// Multi-row Q8_0 x Q8_0 dots, AVX-512 VNNI: q8_0_avx512.cpp's arithmetic per activation row
// (pairs of blocks in one zmm giving 16 i32 lanes of 4-product sums, 8 scales per product
// vector, 256-bit tail blocks, the same float operations in the same order), with the weight
// side done once per tile.
//
// The i32 lanes are computed differently but are the same integers: the single kernel takes
// |w| * (a negated where w < 0); here each tile of activation rows is packed once as unsigned
// bytes a + 128 (a pair of blocks per 64 bytes, the tile's rows interleaved) and vpdpbusd(a +
// 128, w) starts from -128 * (sum of the lane's 4 weights), a weight-only term made once per
// tile. That leaves a load, vpdpbusd, a convert, a scale permute and an FMA per pair and row.
#include "quant/x86_simd.h"  // first: see there

#include <vector>

#include "quant/blocks.h"
#include "quant/multi_dot.h"
#include "quant/multi_tile.h"

namespace ds4::quant {
namespace {

inline __m512i load_pair(const BlockQ8_0* p) {
    return _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[0].qs))),
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p[1].qs)), 1);
}

inline __m128i scales8(const BlockQ8_0* x) {
    __m128i d = _mm_cvtsi32_si128(x[0].d);
    d = _mm_insert_epi16(d, x[1].d, 1);
    d = _mm_insert_epi16(d, x[2].d, 2);
    d = _mm_insert_epi16(d, x[3].d, 3);
    d = _mm_insert_epi16(d, x[4].d, 4);
    d = _mm_insert_epi16(d, x[5].d, 5);
    d = _mm_insert_epi16(d, x[6].d, 6);
    return _mm_insert_epi16(d, x[7].d, 7);
}

struct Kernel {
    int64_t nb;
    std::vector<uint8_t>& codes;  // [nb/2 pairs][T][64]: codes + 128 of blocks 2p, 2p+1
    std::vector<float>& scales;   // [nb/8 groups][T][8]: f16 scales as f32

    void pack(const void* const* act, int T) {
        const int64_t pairs = (nb + 1) / 2, groups = (nb + 7) / 8;
        if (codes.size() < size_t(pairs * T * 64)) codes.resize(size_t(pairs * T * 64));
        if (scales.size() < size_t(groups * T * 8)) scales.resize(size_t(groups * T * 8));
        const __m256i bias = _mm256_set1_epi8(char(0x80));
        for (int t = 0; t < T; ++t) {
            const auto* a = static_cast<const BlockQ8_0*>(act[t]);
            for (int64_t b = 0; b < nb; ++b) {
                const __m256i q = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a[b].qs));
                _mm256_storeu_si256(
                    reinterpret_cast<__m256i*>(&codes[size_t(((b / 2) * T + t) * 64 + (b % 2) * 32)]),
                    _mm256_xor_si256(q, bias));
                scales[size_t(((b / 8) * T + t) * 8 + b % 8)] = _cvtsh_ss(a[b].d);
            }
        }
    }

    template <int T>
    void tile(const uint8_t* wp, float* out) const {
        const auto* x = reinterpret_cast<const BlockQ8_0*>(wp);
        const uint8_t* pc = codes.data();
        const float* ps = scales.data();
        const __m512i zero = _mm512_setzero_si512(), bias = _mm512_set1_epi8(char(0x80));
        const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
        __m512 acc0[T], acc1[T];
        for (int t = 0; t < T; ++t) acc0[t] = acc1[t] = _mm512_setzero_ps();
        int64_t b = 0;
        for (; b + 8 <= nb; b += 8) {
            const __m256 wd = _mm256_cvtph_ps(scales8(x + b));
            const float* sg = ps + (b / 8) * T * 8;
            for (int k = 0; k < 8; k += 4) {
                const __m512i w0 = load_pair(x + b + k), w1 = load_pair(x + b + k + 2);
                const __m512i c0 = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, w0));
                const __m512i c1 = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, bias, w1));
                const __m512i pick0 = _mm512_add_epi32(pick, _mm512_set1_epi32(k));
                const __m512i pick1 = _mm512_add_epi32(pick, _mm512_set1_epi32(k + 2));
                const uint8_t* a0 = pc + ((b + k) / 2) * T * 64;
                const uint8_t* a1 = a0 + T * 64;
                for (int t = 0; t < T; ++t) {
                    const __m512 s = _mm512_castps256_ps512(_mm256_mul_ps(wd, _mm256_loadu_ps(sg + t * 8)));
                    const __m512i p0 = _mm512_dpbusd_epi32(c0, _mm512_loadu_si512(a0 + t * 64), w0);
                    const __m512i p1 = _mm512_dpbusd_epi32(c1, _mm512_loadu_si512(a1 + t * 64), w1);
                    acc0[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p0), _mm512_permutexvar_ps(pick0, s), acc0[t]);
                    acc1[t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(p1), _mm512_permutexvar_ps(pick1, s), acc1[t]);
                }
            }
        }
        __m256 tail[T];
        for (int t = 0; t < T; ++t) tail[t] = _mm256_setzero_ps();
        for (; b < nb; ++b) {
            const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x[b].qs));
            const __m256i c = _mm256_sub_epi32(
                _mm256_setzero_si256(),
                _mm256_dpbusd_epi32(_mm256_setzero_si256(), _mm512_castsi512_si256(bias), wq));
            const float wd = _cvtsh_ss(x[b].d);
            const uint8_t* a = pc + (b / 2) * T * 64 + (b % 2) * 32;
            const float* sb = ps + (b / 8) * T * 8 + b % 8;
            for (int t = 0; t < T; ++t) {
                const __m256i p = _mm256_dpbusd_epi32(
                    c, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + t * 64)), wq);
                tail[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(wd * sb[t * 8]), tail[t]);
            }
        }
        for (int t = 0; t < T; ++t)
            out[t] = _mm512_reduce_add_ps(_mm512_add_ps(acc0[t], acc1[t])) + hsum_ps(tail[t]);
    }
};

}  // namespace

void multi_q8_0_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                       const void* const* act, int64_t n_act, float* const* y) {
    thread_local std::vector<uint8_t> codes;
    thread_local std::vector<float> scales;
    Kernel k{n / kQK8_0, codes, scales};
    run_packed_tiles<4>(k, W, w_stride, rows, act, n_act, y);
}

}  // namespace ds4::quant
