// AVX2 attention (attention_simd.h over 8-float vectors; tails masked) and indexer scores
// (indexer_simd.h).
#include <immintrin.h>

#include "ops/attention_simd.h"
#include "ops/indexer_simd.h"
#include "ops/attention_kernels.h"

namespace ds4::ops::avx2 {
namespace {

struct V8 {
    using reg = __m256;
    static constexpr int width = 8;
    static __m256i mask(int n) {
        return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    }
    static reg zero() { return _mm256_setzero_ps(); }
    static reg load(const float* p) { return _mm256_loadu_ps(p); }
    static reg load_tail(const float* p, int n) { return _mm256_maskload_ps(p, mask(n)); }
    static void store(float* p, reg v) { _mm256_storeu_ps(p, v); }
    static void store_tail(float* p, reg v, int n) { _mm256_maskstore_ps(p, mask(n), v); }
    static reg fmadd(reg a, reg b, reg c) { return _mm256_fmadd_ps(a, b, c); }
    static reg mul(reg a, reg b) { return _mm256_mul_ps(a, b); }
    static reg broadcast(float x) { return _mm256_set1_ps(x); }
    static reg relu(reg v) { return _mm256_max_ps(v, _mm256_setzero_ps()); }
    static float sum(reg v) {
        const __m128 h = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
        const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
        return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q)));
    }
};

}  // namespace

void attend_heads(const float* q, int n_head, const AttentionRows& rows, const float* sinks, float scale,
                  float* out, float* scratch) {
    const ::AttnRows r{rows.keys, rows.values, rows.n_rows, rows.key_dim, rows.value_dim};
    ::attend_heads<V8>(q, n_head, r, sinks, scale, out, scratch);
}

// 2 rows x 4 head vectors: 8 accumulators of the 16 registers.
void indexer_scores(const float* q, const float* weights, int n_head, int dim, const float* keys,
                    int64_t r0, int64_t r1, float* score) {
    ::indexer_scores_simd<V8, 2, 4>(q, weights, n_head, dim, keys, r0, r1, score);
}

}  // namespace ds4::ops::avx2
