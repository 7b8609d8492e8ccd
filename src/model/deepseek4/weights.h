// The deepseek4 weights bound by name to the mapped GGUF (no copies, except small tensors
// stored in a half/quantized format that the math wants as f32, e.g. the compressor APE).
// Shapes are in spec symbols; every binding was checked by validate_tensors().
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/layout.h"
#include "model/expert_source.h"
#include "model/layer_range.h"
#include "ops/matmul.h"

namespace ds4::deepseek4 {

using model::ExpertMatrix;

struct CompressorWeights {
    int ratio = 0;                 // 4 or 128
    int width = 0;                 // d: head_dim (attention) or indexer_dim (indexer)
    int coff = 1;                  // 2 for ratio 4 (overlapping windows)
    ops::Matrix kv, gate;          // [coff*d, n_embd]
    std::vector<float> ape;        // [ratio][coff*d], dequantized
    const float* norm = nullptr;   // [d]
};

struct LayerWeights {
    int index = 0;
    int ratio = 0;
    // Attention sublayer.
    ops::Matrix hc_attn_fn;                        // [hc_mix, hc*n_embd]
    const float* hc_attn_scale = nullptr;          // [3]
    const float* hc_attn_base = nullptr;           // [hc_mix]
    const float* attn_norm = nullptr;              // [n_embd]
    ops::Matrix q_a;                               // [q_lora_rank, n_embd]
    const float* q_a_norm = nullptr;               // [q_lora_rank]
    ops::Matrix q_b;                               // [n_head*head_dim, q_lora_rank]
    ops::Matrix kv;                                // [head_dim, n_embd]
    const float* kv_norm = nullptr;                // [head_dim]
    const float* sinks = nullptr;                  // [n_head]
    ops::Matrix out_a;                             // [o_groups*o_lora_rank, n_head/o_groups*head_dim]
    ops::Matrix out_b;                             // [n_embd, o_groups*o_lora_rank]
    CompressorWeights compressor;                  // ratio != 0
    CompressorWeights indexer_compressor;          // ratio == 4
    ops::Matrix indexer_q_b;                       // [indexer_heads*indexer_dim, q_lora_rank]
    ops::Matrix indexer_proj;                      // [indexer_heads, n_embd]
    // FFN sublayer.
    ops::Matrix hc_ffn_fn;
    const float* hc_ffn_scale = nullptr;
    const float* hc_ffn_base = nullptr;
    const float* ffn_norm = nullptr;               // [n_embd]
    ops::Matrix router;                            // [n_expert, n_embd]
    const float* exp_probs_b = nullptr;            // [n_expert], non-hash layers
    const int32_t* tid2eid = nullptr;              // [n_vocab][n_expert_used], hash layers
    ExpertMatrix gate_exps, up_exps;               // [n_expert][expert_ff][n_embd]
    ExpertMatrix down_exps;                        // [n_expert][n_embd][expert_ff]
    ops::Matrix gate_shexp, up_shexp;              // [expert_ff*n_shared, n_embd]
    ops::Matrix down_shexp;                        // [n_embd, expert_ff*n_shared]
};

// Binds one layer's tensors, named prefix + suffix ("blk.3.", or an extra block's "mtp.0."), in
// `f` (already checked by validate_layer_tensors or validate_tensors), as a layer of `kind`
// with index `index` (the trunk layer whose per-layer parameters it uses).
LayerWeights bind_layer(const gguf::File& f, const ModelConfig& cfg, const std::string& prefix, int index,
                        LayerKind kind);

struct Weights {
    ops::Matrix token_embd;                        // [n_vocab, n_embd]
    std::vector<LayerWeights> layers;              // [n_layer]; bound inside the range
    ops::Matrix output_hc_fn;                      // [hc, hc*n_embd]
    const float* output_hc_base = nullptr;         // [hc]
    const float* output_hc_scale = nullptr;        // [1]
    const float* output_norm = nullptr;            // [n_embd]
    ops::Matrix output;                            // [n_vocab, n_embd]

    // Binds the tensors of `range` in `f` (already validated against cfg): layers outside the
    // range stay empty, as do the embedding (range not from layer 0) and the head (range not
    // ending with the output).
    static Weights bind(const gguf::File& f, const ModelConfig& cfg, const model::LayerRange& range);
};

}  // namespace ds4::deepseek4
