// The glm-dsa weights bound by name to the loaded GGUF (no copies); shapes as in layout.h,
// checked by validate_tensors() before binding. Matrix rows are the outputs: a GGUF tensor
// [cols, rows(, k)] is a matrix of rows*k rows of `cols` values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/blocks/swiglu_ffn.h"
#include "model/expert_source.h"
#include "model/glm/config.h"
#include "model/layer_range.h"
#include "ops/matmul.h"

namespace ds4::glm {

using model::ExpertMatrix;

struct LayerWeights {
    int index = 0;
    bool full_indexer = false;  // computes its own top-k (indexer tensors bound)
    bool dense = false;         // dense SwiGLU FFN (else routed experts + shared)
    // Attention.
    const float* attn_norm = nullptr;    // [D]
    ops::Matrix q_a;                     // [q_lora, D]
    const float* q_a_norm = nullptr;     // [q_lora]
    ops::Matrix q_b;                     // [H*(nope+rope), q_lora]
    ops::Matrix kv_a;                    // [kv_lora+rope, D]
    const float* kv_a_norm = nullptr;    // [kv_lora]
    ops::Matrix k_b;                     // [H*kv_lora, nope]: head h's rows h*kv_lora..
    ops::Matrix v_b;                     // [H*v_head, kv_lora]: head h's rows h*v_head..
    ops::Matrix out;                     // [D, H*v_head]
    // DSA indexer (full layers).
    const float* idx_k_norm = nullptr;   // [idx_dim] LayerNorm weight
    const float* idx_k_norm_b = nullptr; // [idx_dim] LayerNorm bias
    ops::Matrix idx_proj;                // [idx_heads, D]
    ops::Matrix idx_k;                   // [idx_dim, D]
    ops::Matrix idx_q_b;                 // [idx_heads*idx_dim, q_lora]
    // FFN.
    const float* ffn_norm = nullptr;     // [D]
    blocks::SwigluWeights dense_ffn;     // dense layers
    ops::Matrix router;                  // [E, D]
    const float* exp_probs_b = nullptr;  // [E] or null
    ExpertMatrix gate_exps, up_exps;     // [E][F][D]
    ExpertMatrix down_exps;              // [E][D][F]
    blocks::SwigluWeights shared;        // [F*n_shared] wide
};

// One layer's tensors named prefix + suffix ("blk.3.").
LayerWeights bind_layer(const gguf::File& f, const GlmConfig& c, const std::string& prefix, int index,
                        bool full_indexer, bool dense);

struct Weights {
    ops::Matrix token_embd;            // [V, D] (range from layer 0)
    std::vector<LayerWeights> layers;  // [n_layer]; bound inside the range
    const float* output_norm = nullptr;
    ops::Matrix output;                // [V, D]; the embedding when the file ties them

    static Weights bind(const gguf::File& f, const GlmConfig& c, const model::LayerRange& range);
};

}  // namespace ds4::glm
