// Reference quantizer core shared by Q2_K and Q4_K: fits one 256-value super-block to the
// "scale and min" form both formats use,
//
//     value_i = (d * sc_j) * q_i - (dmin * mn_j)     for value i in sub-block j,
//
// with q_i in [0, code_max], sc_j and mn_j in [0, scale_max], d and dmin f16, minimising the
// importance-weighted squared error sum_i w_i (value_i - x_i)^2 (the error the tests measure).
// Steps: per sub-block a weighted least-squares search for a continuous (scale, min) with a
// few refinement passes, then a search over the super-block d/dmin in which every sub-block
// picks the integer (sc, mn) of least actual error, then least-squares refits of d/dmin.
// Only the format's packing differs between Q2_K and Q4_K.
#pragma once

#include <cstdint>

namespace ds4::quant {

struct KQuantShape {
    int sub_len;    // values per sub-block: 16 (Q2_K) or 32 (Q4_K)
    int code_max;   // largest code q: 3 or 15
    int scale_max;  // largest sc/mn: 15 or 63
};

struct KQuantBlock {
    uint16_t d, dmin;     // f16 bits
    uint8_t sc[16], mn[16];  // per sub-block (256 / sub_len of them used)
    uint8_t q[256];       // codes in value order
};

// x: 256 values; w: 256 importance weights (nullptr = all ones; negative or non-finite
// weights count as 0). Non-finite values are treated as 0.
KQuantBlock fit_kquant_superblock(const float* x, const float* w, const KQuantShape& shape);

}  // namespace ds4::quant
