// AVX-512 VNNI Q6_K x Q8_K dot: the multi-row kernel (q6_k_multi_avx512.cpp) with one row and one
// activation, so that both give the same bits.
#include "quant/q6_k/q6_k.h"

namespace ds4::quant {

float dot_q6_k_q8_k_avx512(int64_t n, const void* w, const void* act) {
    float y = 0.0f;
    float* out = &y;
    multi_q6_k_avx512(n, w, 0, 1, &act, 1, &out);
    return y;
}

}  // namespace ds4::quant
