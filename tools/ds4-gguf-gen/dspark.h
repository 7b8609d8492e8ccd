// A random DSpark support GGUF (docs/SPECULATIVE.md, "DSpark") matching a generated trunk:
// upstream's layout (tensors mtp.<s>.*, the upstream converter's dspark.* metadata), the
// shapes the trunk's configuration implies, the storage types of the trunk's recipe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "model/deepseek4/layout.h"
#include "options.h"

namespace ds4::gen {

struct DsparkShape {
    uint32_t stages = 3;       // upstream detects DSpark from 3 stages on
    uint32_t block_size = 5;   // Flash's
    uint32_t markov_rank = 0;
    uint32_t noise_token_id = 0;
    std::vector<uint32_t> target_layers;
};

// The drafter for `plan`'s trunk: target layers = the trunk's last three (all of a shorter
// trunk), Markov rank 256 for a Flash-sized n_embd, else the smallest multiple of the Dense
// type's block that is at least 32 (markov_w1/w2 rows are R values long), the noise token
// Flash's 128799 in a 129280 vocabulary, else the last id.
DsparkShape dspark_shape(const GenPlan& plan);

// Its tensors sorted by name (the converter's order): every stage's ratio-0 top-k block, plus
// stage 0's main_proj / main_norm and the last stage's norm, hc_head_*, markov_head.*,
// confidence_head.proj. Classes pick the recipe's types: the three matrices of the heads are
// Dense, hc_head_fn Hc, the vectors Norm (F32).
std::vector<deepseek4::TensorSpec> dspark_layout(const deepseek4::ModelConfig& cfg, const DsparkShape& d);

// Writes the file; returns its size. Throws ds4::Error when a recipe type's block does not
// divide a DSpark tensor's rows.
uint64_t generate_dspark(const GenPlan& plan, const std::string& out_path, std::FILE* log);

}  // namespace ds4::gen
