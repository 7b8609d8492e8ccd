// Round-to-nearest (ties to even) of a float into an integer range, safe for any input:
// NaN and values at or below lo give lo, values at or above hi give hi. Used by the
// reference quantizers, whose inputs are arbitrary user floats.
#pragma once

#include <bit>
#include <cstdint>

namespace ds4::quant {

inline int round_clamp(float v, int lo, int hi) {
    // Branch-free (the quantizers' inner loops clamp often and unpredictably); written so
    // that a NaN v selects lo.
    float c = v > float(lo) ? v : float(lo);
    c = c < float(hi) ? c : float(hi);
    // |c| < 2^22 here (lo/hi are small): adding 1.5 * 2^23 leaves the rounded integer in the
    // low mantissa bits, without a libm call.
    return int(std::bit_cast<int32_t>(c + 12582912.f) - 0x4B400000);
}

}  // namespace ds4::quant
