// AVX2 Q5_K x Q8_K dot: the multi-row kernel (q5_k_multi_avx2.cpp) with one row and one
// activation, so that both give the same bits.
#include "quant/q5_k/q5_k.h"

namespace ds4::quant {

float dot_q5_k_q8_k_avx2(int64_t n, const void* w, const void* act) {
    float y = 0.0f;
    float* out = &y;
    multi_q5_k_avx2(n, w, 0, 1, &act, 1, &out);
    return y;
}

}  // namespace ds4::quant
