// Byte layouts of the quantized blocks (ggml's formats; spec/ARCHITECTURE.md §2.5). f16 fields are
// stored as raw IEEE half bits (common/half.h converts).
#pragma once

#include <cstdint>

namespace ds4::quant {

constexpr int kQK8_0 = 32;   // values per Q8_0 block
constexpr int kQK4_0 = 32;   // values per Q4_0 block
constexpr int kQK_K = 256;   // values per K-quant / IQ super-block
constexpr int kQK_MXFP4 = 32;

struct BlockQ8_0 {           // 34 B / 32 values: value i = d * qs[i]
    uint16_t d;
    int8_t qs[kQK8_0];
};
struct BlockQ4_0 {           // 18 B / 32 values: value j = d * (q_j - 8)
    uint16_t d;
    uint8_t qs[kQK4_0 / 2];      // low nibble -> value j, high nibble -> value j+16
};
struct BlockQ8_K {           // activation block for K/IQ dots: 292 B / 256 values
    float d;
    int8_t qs[kQK_K];
    int16_t bsums[kQK_K / 16];  // sum of each 16 consecutive qs
};
struct BlockQ2_K {           // 84 B / 256 values
    uint8_t scales[kQK_K / 16];  // low nibble scale, high nibble min, per 16 values
    uint8_t qs[kQK_K / 4];       // 2-bit codes
    uint16_t d, dmin;
};
struct BlockQ4_K {           // 144 B / 256 values
    uint16_t d, dmin;
    uint8_t scales[12];          // 8 x (6-bit scale, 6-bit min), packed
    uint8_t qs[kQK_K / 2];       // 4-bit codes
};
struct BlockQ5_K {           // 176 B / 256 values: Q4_K plus a fifth (high) bit per code
    uint16_t d, dmin;
    uint8_t scales[12];          // 8 x (6-bit scale, 6-bit min), packed as Q4_K's
    uint8_t qh[kQK_K / 8];       // bit j of qh[l]: high bit of value 32j + l
    uint8_t qs[kQK_K / 2];       // low 4 bits, nibbles as Q4_K's codes
};
struct BlockQ6_K {           // 210 B / 256 values: value i = d * sc[i/16] * (q_i - 32)
    uint8_t ql[kQK_K / 2];       // low 4 bits (layout: q6_k/q6_k.h)
    uint8_t qh[kQK_K / 4];       // high 2 bits
    int8_t scales[kQK_K / 16];   // one signed 8-bit scale per 16 values
    uint16_t d;
};
struct BlockIQ2_XXS {        // 66 B / 256 values
    uint16_t d;
    uint16_t qs[kQK_K / 8];      // per 32 values: 4 grid indices (u8) + 4x7 sign bits + 4-bit scale
};
struct BlockMXFP4 {          // 17 B / 32 values
    uint8_t e;                   // E8M0 shared exponent
    uint8_t qs[kQK_MXFP4 / 2];   // E2M1 codes: low nibble -> value j, high nibble -> value j+16
};

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockMXFP4) == 17);

}  // namespace ds4::quant
