// Unpacking of Q4_K's 12 scale bytes for the SIMD kernels: the eight 6-bit scales and the
// eight 6-bit mins, each as 8 consecutive bytes (the same values as q4_k_scale_min).
#pragma once

#include <cstdint>
#include <cstring>

namespace ds4::quant {

struct Q4KScales {
    uint64_t sc;  // byte j = scale of sub-block j
    uint64_t mn;  // byte j = min of sub-block j
};

inline Q4KScales q4_k_unpack_scales(const uint8_t* s) {
    uint32_t w0, w1, w2;
    std::memcpy(&w0, s, 4);
    std::memcpy(&w1, s + 4, 4);
    std::memcpy(&w2, s + 8, 4);
    // Sub-blocks 0..3: low 6 bits of bytes 0..3 (scales) and 4..7 (mins). Sub-blocks 4..7:
    // low/high nibbles of bytes 8..11 plus the top two bits of bytes 0..3 / 4..7.
    const uint32_t sc_lo = w0 & 0x3f3f3f3fu, mn_lo = w1 & 0x3f3f3f3fu;
    const uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
    const uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
    return {sc_lo | (uint64_t(sc_hi) << 32), mn_lo | (uint64_t(mn_hi) << 32)};
}

}  // namespace ds4::quant
