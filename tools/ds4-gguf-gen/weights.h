// Random weights for one tensor of the layout, generated and converted to the tensor's storage
// type row by row (several threads; each row has its own random stream, so the bytes do not
// depend on the thread count).
//
// Scales keep a random model well-conditioned through any number of layers (every sublayer
// input is RMS-normalised, so what matters is that each product lands at O(1)):
//   linear weights          N(0, 1/fan_in)      -> projections of unit-RMS inputs are O(1)
//   token_embd              N(0, 1)             -> the residual starts at the scale of F
//   DSpark markov_w1        N(0, 1)             -> a per-token table like the embedding
//   norm weights            1 + 0.1 N
//   hc_*_fn, output_hc_fn   N(0, 1/fan_in)      -> Sinkhorn / sigmoid inputs O(1)
//   hc_*_scale, output_hc_scale   1 + 0.2 N;  hc_*_base, output_hc_base   0.5 N
//   attn_sinks              N(0, 1)             -> comparable to the q·k/sqrt(Dh) logits
//   exp_probs_b             0.1 N               -> moves selection a little, never dominates
//   compressor ape          0.1 N
//   ffn_gate_tid2eid        K distinct expert ids per token, uniform
// ("N" is an approximately normal variate, see rng.h.)
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::gen {

enum class Init { Linear, Embedding, NormWeight, HcScale, HcBase, Sinks, ProbsBias, Ape, Tid2Eid };

// The initialisation rule of a layout tensor (from its name).
Init init_for(const deepseek4::TensorSpec& spec);

// Values of row `row` (spec.ne[0] floats) of a float-valued tensor.
void generate_row(const deepseek4::TensorSpec& spec, Init init, uint64_t seed, int64_t row,
                  float* out);

// The whole tensor's bytes in storage type `type` (I32 for tid2eid). Matrices in IQ2_XXS,
// Q2_K, Q4_K, Q5_K and Q6_K are drawn directly as random blocks (random_blocks.h) unless `exact_quant`,
// which runs the reference quantizer on normal rows (all-ones importance for IQ2_XXS).
// `out` must be exactly the tensor's byte size. `pool` may be null.
void generate_tensor(const deepseek4::TensorSpec& spec, TensorType type, const deepseek4::ModelConfig& cfg,
                     uint64_t seed, bool exact_quant, ThreadPool* pool, std::span<uint8_t> out);

// Byte size of the tensor in storage type `type`.
uint64_t tensor_bytes(const deepseek4::TensorSpec& spec, TensorType type);

}  // namespace ds4::gen
