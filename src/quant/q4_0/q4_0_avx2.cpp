// AVX2 Q4_0 x Q8_0 dot: the multi-row kernel (q4_0_multi_avx2.cpp) with one row and one
// activation, so that both give the same bits (the scalar reference's, q4_0.h).
#include "quant/q4_0/q4_0.h"

namespace ds4::quant {

float dot_q4_0_q8_0_avx2(int64_t n, const void* w, const void* act) {
    float y = 0.0f;
    float* out = &y;
    multi_q4_0_avx2(n, w, 0, 1, &act, 1, &out);
    return y;
}

}  // namespace ds4::quant
