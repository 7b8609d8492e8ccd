// AVX-512 attention (attention_simd.h over 16-float vectors; tails masked) and indexer scores
// (indexer_simd.h).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <immintrin.h>

#include "ops/attention_simd.h"
#include "ops/indexer_simd.h"
#include "ops/attention_kernels.h"

namespace ds4::ops::avx512 {
namespace {

struct V16 {
    using reg = __m512;
    static constexpr int width = 16;
    static __mmask16 mask(int n) { return __mmask16((1u << n) - 1u); }
    static reg zero() { return _mm512_setzero_ps(); }
    static reg load(const float* p) { return _mm512_loadu_ps(p); }
    static reg load_tail(const float* p, int n) { return _mm512_maskz_loadu_ps(mask(n), p); }
    static void store(float* p, reg v) { _mm512_storeu_ps(p, v); }
    static void store_tail(float* p, reg v, int n) { _mm512_mask_storeu_ps(p, mask(n), v); }
    static reg fmadd(reg a, reg b, reg c) { return _mm512_fmadd_ps(a, b, c); }
    static reg mul(reg a, reg b) { return _mm512_mul_ps(a, b); }
    static reg broadcast(float x) { return _mm512_set1_ps(x); }
    static reg relu(reg v) { return _mm512_max_ps(v, _mm512_setzero_ps()); }
    static float sum(reg v) { return _mm512_reduce_add_ps(v); }
};

}  // namespace

void attend_heads(const float* q, int n_head, const AttentionRows& rows, const float* sinks, float scale,
                  float* out, float* scratch) {
    const ::AttnRows r{rows.keys, rows.values, rows.n_rows, rows.key_dim, rows.value_dim};
    ::attend_heads<V16>(q, n_head, r, sinks, scale, out, scratch);
}

// 4 rows x 4 head vectors: 16 accumulators, 64 heads (Flash) in one pass.
void indexer_scores(const float* q, const float* weights, int n_head, int dim, const float* keys,
                    int64_t r0, int64_t r1, float* score) {
    ::indexer_scores_simd<V16, 4, 4>(q, weights, n_head, dim, keys, r0, r1, score);
}

}  // namespace ds4::ops::avx512
