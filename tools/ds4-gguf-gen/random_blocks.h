// Random weights drawn directly as quantized blocks, for the formats whose reference
// quantizers are too slow for Flash-sized tensors (measured here: IQ2_XXS 0.19, Q2_K 0.65,
// Q4_K 0.9 M values/s per core, i.e. days for the 17·10^9 expert values of a 4-layer Flash
// file). Every bit pattern of the codes is a valid block; only the scales are chosen:
//   IQ2_XXS  grid indices, signs and 4-bit scales random; d sets the RMS (signs are
//            symmetric, so the mean is 0)
//   Q2_K     2-bit codes and 4-bit scales random, each group's min equal to its scale and
//            dmin = 1.5 d, so a group's values are d·sc·(q − 1.5): mean 0
//   Q4_K     the same with 6-bit scales, 4-bit codes and dmin = 7.5 d: d·sc·(q − 7.5)
//   Q5_K     the same with 5-bit codes and dmin = 15.5 d: d·sc·(q − 15.5)
//   Q6_K     6-bit codes and signed 8-bit scales random (−127..127, symmetric), so the
//            values d·sc·(q − 32) have mean 0
// (Q4_0's reference quantizer is fast: it quantizes normal rows like Q8_0.)
// d is calibrated once per format by dequantizing a sample, so the dequantized values have
// the requested RMS.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"
#include "rng.h"

namespace ds4::gen {

bool has_random_blocks(TensorType t);

// One row of n values (a multiple of the block size) of random blocks of type t with mean 0
// and RMS `rms`.
void random_blocks_row(TensorType t, Rng& rng, int64_t n, float rms, uint8_t* out);

}  // namespace ds4::gen
