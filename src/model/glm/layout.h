// The tensors a glm-dsa configuration implies, as llama.cpp's glm-dsa loader names and shapes
// them (GGUF shape ne, ne[0] contiguous), each with a class that groups tensors taking the same
// storage type in a quantization recipe (`ds4-gguf-gen --type CLASS=TYPE`).
//
// Per trunk layer il ("blk.<il>."), D = n_embd, H = n_head:
//   attn_norm [D] Norm, attn_q_a [D, q_lora] Attn, attn_q_a_norm [q_lora] Norm,
//   attn_q_b [q_lora, H*(nope+rope)] Attn, attn_kv_a_mqa [D, kv_lora+rope] Attn,
//   attn_kv_a_norm [kv_lora] Norm, attn_k_b [nope, kv_lora, H] Attn,
//   attn_v_b [kv_lora, v_head, H] Attn, attn_output [H*v_head, D] Attn,
//   full indexer layers only: indexer.k_norm.{weight,bias} [idx_dim] Norm, indexer.proj
//     [D, idx_heads] IndexerProj, indexer.attn_k [D, idx_dim] Indexer, indexer.attn_q_b
//     [q_lora, idx_heads*idx_dim] Indexer,
//   ffn_norm [D] Norm, then dense layers: ffn_gate, ffn_up [D, dense_ff], ffn_down [dense_ff, D]
//   DenseFfn; routed layers: ffn_gate_inp [D, E] Router, exp_probs_b.bias [E] Norm (optional),
//   ffn_gate_exps, ffn_up_exps [D, F, E] GateUpExps, ffn_down_exps [F, D, E] DownExps,
//   ffn_{gate,up}_shexp [D, F*n_shared], ffn_down_shexp [F*n_shared, D] Shared.
// Global: token_embd [D, V] Embd, output_norm [D] Norm, output [D, V] Output (optional: absent
// means the embedding is tied to the output, as llama.cpp allows).
// The embedded MTP block blk.<n_layer> holds a full routed layer (its indexer tensors
// optional) plus nextn.eh_proj [2D, D] MtpProj, nextn.enorm, nextn.hnorm [D] Norm and
// optionally nextn.shared_head_norm [D] Norm, nextn.embed_tokens / shared_head_head [D, V].
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/glm/config.h"
#include "model/layer_range.h"

namespace ds4::gguf {
class File;
}

namespace ds4::glm {

enum class TensorClass : int {
    Embd,        // token_embd
    Output,      // output
    Attn,        // attn_q_a, attn_q_b, attn_kv_a_mqa, attn_k_b, attn_v_b, attn_output
    Indexer,     // indexer.attn_k, indexer.attn_q_b
    IndexerProj, // indexer.proj (llama.cpp's converter keeps it F32)
    DenseFfn,    // the leading dense layers' ffn_{gate,up,down}
    Shared,      // ffn_{gate,up,down}_shexp
    GateUpExps,  // ffn_gate_exps, ffn_up_exps
    DownExps,    // ffn_down_exps
    Router,      // ffn_gate_inp
    Norm,        // norms, biases: always F32
    MtpProj,     // nextn.eh_proj
};
inline constexpr int kTensorClassCount = 12;

std::string_view tensor_class_name(TensorClass c);
// A `--type` selector: a class name, "all" (every class but Norm) or "exps" (both expert
// classes); nullopt if unknown.
std::optional<std::vector<TensorClass>> tensor_classes_from_name(std::string_view name);

struct TensorSpec {
    std::string name;
    std::vector<int64_t> ne;
    TensorClass cls;
    int layer;              // -1 for global tensors
    bool optional = false;  // may be absent (exp_probs_b, output, the MTP block's extras)

    int64_t n_elements() const;
};

// One layer's tensors named prefix + suffix; `full_indexer`: with the indexer tensors;
// `dense`: dense FFN instead of routed experts.
std::vector<TensorSpec> layer_tensor_layout(const GlmConfig& c, const std::string& prefix, int layer,
                                            bool full_indexer, bool dense);
// Every trunk tensor in file order: token_embd, blk.0 .. blk.{L-1}, output_norm, output.
std::vector<TensorSpec> tensor_layout(const GlmConfig& c);
// The embedded MTP block blk.<n_layer> (routed FFN, with indexer tensors, as published files
// carry them), its nextn.* tensors last.
std::vector<TensorSpec> mtp_layout(const GlmConfig& c);

// Checks the tensor directory of `f` against the layout for `range` (the embedding when it
// starts at layer 0, output_norm/output when it ends with the head): every tensor present with
// the exact shape, norms F32, every other tensor an engine weight format whose block divides
// its rows. Unknown tensors are an error, except the indexer tensors of a shared layer
// (unused) and the MTP block's tensors (checked when the MTP block is loaded).
void validate_tensors(const gguf::File& f, const GlmConfig& c, const model::LayerRange& range);
void validate_specs(const gguf::File& f, const std::vector<TensorSpec>& specs);

}  // namespace ds4::glm
