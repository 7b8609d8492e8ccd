// Byte layouts of the quantized blocks (ggml's formats; spec/ARCHITECTURE.md §2.5). f16 fields are
// stored as raw IEEE half bits (common/half.h converts).
#pragma once

#include <cstdint>

namespace ds4::quant {

constexpr int kQK8_0 = 32;   // values per Q8_0 block
constexpr int kQK_K = 256;   // values per K-quant / IQ super-block
constexpr int kQK_MXFP4 = 32;

struct BlockQ8_0 {           // 34 B / 32 values: value i = d * qs[i]
    uint16_t d;
    int8_t qs[kQK8_0];
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
struct BlockIQ2_XXS {        // 66 B / 256 values
    uint16_t d;
    uint16_t qs[kQK_K / 8];      // per 32 values: 4 grid indices (u8) + 4x7 sign bits + 4-bit scale
};
struct BlockMXFP4 {          // 17 B / 32 values
    uint8_t e;                   // E8M0 shared exponent
    uint8_t qs[kQK_MXFP4 / 2];   // E2M1 codes: low nibble -> value j, high nibble -> value j+16
};

static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockIQ2_XXS) == 66);
static_assert(sizeof(BlockMXFP4) == 17);

}  // namespace ds4::quant
