// Tables for the IQ2_XXS SIMD kernels, derived from the format (not data copied from ggml).
#pragma once

#include <array>
#include <cstdint>

#include "quant/iq2_xxs/iq2_xxs.h"

namespace ds4::quant {

// For each 7-bit sign field, 8 bytes of 0xFF (negate) / 0x00 with the parity bit applied:
// (q ^ m) - m negates the marked activation bytes.
inline constexpr std::array<uint64_t, 128> kIq2xxsSignBytes = [] {
    std::array<uint64_t, 128> t{};
    for (uint32_t f = 0; f < 128; ++f) {
        const uint8_t s = iq2xxs_sign_mask(f);
        for (int j = 0; j < 8; ++j)
            if ((s >> j) & 1) t[f] |= uint64_t(0xff) << (8 * j);
    }
    return t;
}();

}  // namespace ds4::quant
