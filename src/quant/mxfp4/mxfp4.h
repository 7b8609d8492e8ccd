// MXFP4 weights (blocks.h BlockMXFP4: an E8M0 exponent and 32 E2M1 codes) times Q8_0
// activations (activation/activation.h quantize_q8_0).
//
// Codes are taken as ggml's doubled E2M1 integers {0, 1, 2, 3, 4, 6, 8, 12} with bit 3 the
// sign, and the exponent as 2^(e-128) (half of the E8M0 value, to undo the doubling), so a
// block contributes float(integer sum) * (2^(e-128) * d_a) exactly like ggml. Same activation
// precondition as q8_0/q8_0.h: codes in [-127, 127].
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds4::quant {

// The 16 code values, doubled (E2M1 value * 2): data, as in the OCP MX spec / ggml.
inline constexpr int8_t kMxfp4Values[16] = {0, 1, 2, 3, 4, 6, 8, 12,
                                            0, -1, -2, -3, -4, -6, -8, -12};

// 2^(e-128) for an E8M0 exponent byte e (e = 0 and 1 give subnormal floats).
float mxfp4_scale(uint8_t e);

float dot_mxfp4_scalar(int64_t n, const void* w, const void* act);

namespace avx2 {
float dot_mxfp4(int64_t n, const void* w, const void* act);
}
namespace avx512 {
float dot_mxfp4(int64_t n, const void* w, const void* act);
}

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA:
// mxfp4_multi_avx2.cpp, mxfp4_multi_avx512.cpp.
void multi_mxfp4_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                      const void* const* act, int64_t n_act, float* const* y);
void multi_mxfp4_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                        const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
