// The multi-row dot kernels behind quant.h multi_dot_kernel(), one per format and ISA (files
// <format>_multi_<isa>.cpp). Each repeats, per activation row, the float operations of the
// format's dot kernel on the same ISA in the same order, on the same integer lane values
// (which some compute differently, e.g. from activations packed as unsigned bytes), while the
// weight side (loads, unpacking, codebook lookups, scales) is done once for a tile of
// activation rows. Signature and contract: quant.h MultiDotFn; tests/unit/
// quant_multi_dot_test.cpp holds every kernel bit-identical to the dot kernel.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ds4::quant {

#define DS4_MULTI_DOT(name)                                                                \
    void name(int64_t n, const void* W, size_t w_stride, int64_t rows, const void* const* act, \
              int64_t n_act, float* const* y)

DS4_MULTI_DOT(multi_q8_0_avx2);
DS4_MULTI_DOT(multi_q8_0_avx512);
DS4_MULTI_DOT(multi_mxfp4_avx2);
DS4_MULTI_DOT(multi_mxfp4_avx512);
DS4_MULTI_DOT(multi_q2_k_avx2);
DS4_MULTI_DOT(multi_q2_k_avx512);
DS4_MULTI_DOT(multi_q4_k_avx2);
DS4_MULTI_DOT(multi_q4_k_avx512);
DS4_MULTI_DOT(multi_iq2_xxs_avx2);
DS4_MULTI_DOT(multi_iq2_xxs_avx512);
DS4_MULTI_DOT(multi_f16_avx2);
DS4_MULTI_DOT(multi_f16_avx512);

#undef DS4_MULTI_DOT

}  // namespace ds4::quant
