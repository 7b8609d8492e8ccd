// The generator's second output: the same random weights as a directory in the layout of
// DeepSeek's official safetensors release (quantize/safetensors.h), so the whole path
// safetensors -> ds4-quantize -> GGUF -> ds4 is tested on small shapes.
//
//   official  what the release stores: routed experts FP4 (I8, two E2M1 codes per byte) with
//             an E8M0 scale per 32 values; other matrices whose dims are multiples of 128
//             FP8 E4M3 with an E8M0 scale per 128 x 128 block (the others BF16); embedding,
//             head and router BF16; hc and ape matrices and every vector F32; tid2eid I64.
//             Values are the generator's rows rounded to those formats (nearest, ties to even;
//             the scale the smallest power of two that keeps the block's largest magnitude
//             in range).
//   f32       every float tensor F32 (experts one [out, in] tensor each): the generator's
//             values exactly, so ds4-quantize --hf gives the generator's GGUF byte for byte.
// One shard per layer (the globals in the first), model.safetensors.index.json beside them.
#pragma once

#include <cstdio>
#include <string>

#include "options.h"

namespace ds4::gen {

enum class HfDtypes { Official, F32 };

// Writes the trunk's tensors of `plan` (not MTP heads) into `dir` (created if needed).
// Throws ds4::Error on I/O failure.
void write_hf(const GenPlan& plan, const std::string& dir, HfDtypes dtypes, std::FILE* log);

}  // namespace ds4::gen
