// IQ2_XXS weights (spec/ARCHITECTURE.md §2.5): 256 values per 66-byte block. Per 32 values, 8 bytes:
// a u32 of four codebook indices (one per 8 values, into kIq2xxsGrid) and a u32 holding four
// 7-bit sign fields (bits 7k..7k+6; the 8th sign is their parity, so negatives come in pairs)
// and a 4-bit scale l in bits 28..31. Value = d * (2l+1)/8 * grid magnitude * sign.
// Dots take Q8_K activations. The kernels below are what kIq2XxsFormat lists.
#pragma once

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "quant/blocks.h"

namespace ds4::quant {

// The full 8-bit sign mask of a 7-bit field (bits above 6 are ignored): bit 7 = parity.
constexpr uint8_t iq2xxs_sign_mask(uint32_t field7) {
    field7 &= 127u;
    return uint8_t(field7 | ((std::popcount(field7) & 1u) << 7));
}
// iq2xxs_sign_mask of every field, for the kernels (no popcount instruction at baseline x86-64).
inline constexpr std::array<uint8_t, 128> kIq2xxsSignMasks = [] {
    std::array<uint8_t, 128> t{};
    for (uint32_t f = 0; f < 128; ++f) t[f] = iq2xxs_sign_mask(f);
    return t;
}();

void dequantize_iq2_xxs(const BlockIQ2_XXS* src, float* dst, int64_t n);
// importance: n weights of the squared error, or nullptr for all ones (ggml insists on an
// importance matrix for this format; all ones is what it accepts in place of none).
void quantize_iq2_xxs(const float* src, BlockIQ2_XXS* dst, int64_t n, const float* importance);

// sum_i w_i * a_i over n values (n a multiple of 256). Integer parts are exact; kernels differ
// only in the order of the per-block float sums. Activation codes must lie in [-127, 127], as
// quantize_q8_k produces them (negating -128 would wrap in the SIMD kernels).
float dot_iq2_xxs_q8_k_scalar(int64_t n, const void* w, const void* act);
float dot_iq2_xxs_q8_k_avx2(int64_t n, const void* w, const void* act);
float dot_iq2_xxs_q8_k_avx512(int64_t n, const void* w, const void* act);

// The multi-row kernels (quant.h MultiDotFn, contract in multi_dot.h), one per ISA:
// iq2_xxs_multi_avx2.cpp, iq2_xxs_multi_avx512.cpp.
void multi_iq2_xxs_avx2(int64_t n, const void* W, size_t w_stride, int64_t rows,
                        const void* const* act, int64_t n_act, float* const* y);
void multi_iq2_xxs_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows,
                          const void* const* act, int64_t n_act, float* const* y);

}  // namespace ds4::quant
