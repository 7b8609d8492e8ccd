// The tensors a deepseek4 configuration implies (spec/ARCHITECTURE.md §2.2-2.3): GGUF name, GGUF
// shape ne (ne[0] contiguous), the layer, and a tensor CLASS. Classes group tensors that take
// the same storage type in a quantization recipe (the generator's and the quantizer's
// `--type CLASS=TYPE`); Norm and Tid2Eid are fixed (F32 / I32) in every published file.
//
// validate_tensors() holds a file's tensor directory to the layout and throws ds4::Error with
// the tensor named, e.g. "tensor blk.3.attn_q_b.weight: shape [1024, 32768] expected [..]".
// The MTP heads' tensors (both layouts) are listed at the end.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gguf/tensor_type.h"
#include "model/deepseek4/config.h"
#include "model/layer_range.h"

namespace ds4::gguf {
class File;
}

namespace ds4::deepseek4 {

enum class TensorClass : int {
    Embd,        // token_embd
    Output,      // output.weight
    Dense,       // attn_q_a, attn_q_b, attn_kv, attn_output_a, attn_output_b
    Shared,      // ffn_{gate,up,down}_shexp
    GateUpExps,  // ffn_gate_exps, ffn_up_exps
    DownExps,    // ffn_down_exps
    Hc,          // hc_attn_fn, hc_ffn_fn, output_hc_fn
    Compressor,  // {attn,indexer}_compressor_{kv,gate,ape}
    Indexer,     // indexer.attn_q_b, indexer.proj
    Router,      // ffn_gate_inp
    Norm,        // norms, hc base/scale, attn_sinks, exp_probs_b: always F32
    Tid2Eid,     // ffn_gate_tid2eid: always I32
    MtpProj,     // an MTP head's e_proj, h_proj (llama.cpp: nextn.eh_proj)
};
inline constexpr int kTensorClassCount = 13;

// Lower-case class name as used on command lines ("gate_up_exps", "norm", ...).
std::string_view tensor_class_name(TensorClass c);
// Classes named by a `--type` selector: a class name, or the groups "all" (every selectable
// class, i.e. not Norm/Tid2Eid) and "exps" (GateUpExps + DownExps). nullopt if unknown.
std::optional<std::vector<TensorClass>> tensor_classes_from_name(std::string_view name);
// Whether a recipe may choose the type of this class (false for Norm and Tid2Eid).
bool is_selectable(TensorClass c);

// Storage type per class. Norm is always F32 and Tid2Eid always I32.
struct TypeRecipe {
    std::array<TensorType, kTensorClassCount> type;

    TensorType of(TensorClass c) const { return type[size_t(c)]; }
    void set(TensorClass c, TensorType t);  // throws for a fixed class

    // Every selectable class `t`.
    static TypeRecipe uniform(TensorType t);
    // The published DS4 q2 recipe: IQ2_XXS gate/up, Q2_K down, Q8_0 dense/shared/output,
    // F16 embedding/hc/compressor/indexer/router (§2.2-2.3); Q8_0 MTP projections (§2.4).
    static TypeRecipe flash_q2();
};

struct TensorSpec {
    std::string name;          // GGUF name, e.g. "blk.3.attn_q_b.weight"
    std::vector<int64_t> ne;   // GGUF shape, ne[0] contiguous
    TensorClass cls;
    int layer;                 // -1 for global tensors

    int64_t n_elements() const;
    int64_t row_length() const { return ne[0]; }
};

// What a layer's tensors depend on besides the configuration: its compression ratio (0, 4 or
// 128) and whether it routes by hash (tid2eid instead of exp_probs_b). A trunk layer's comes
// from the configuration; an extra block (extra_block.h) states its own.
struct LayerKind {
    uint32_t ratio = 0;
    bool hash = false;
    static LayerKind of(const ModelConfig& c, uint32_t il);
};

// One layer's tensors, named prefix + suffix ("blk.3." + "attn_q_b.weight"), in §2.3 order,
// each recording `layer`. Throws for a ratio other than 0, 4 or 128.
std::vector<TensorSpec> layer_tensor_layout(const ModelConfig& cfg, const std::string& prefix, int layer,
                                            LayerKind kind);

// All tensors of the configuration, in file order: token_embd, then blk.0 … blk.{L-1} (each
// in §2.3 order), then the output head. exp_probs_b is listed for non-hash layers only.
std::vector<TensorSpec> tensor_layout(const ModelConfig& cfg);

// Checks the tensor directory of `f` against tensor_layout(cfg): every tensor present with
// the exact shape; Norm tensors F32, tid2eid I32, every other tensor one of the engine's
// weight formats; tid2eid entries in [0, n_expert). Tensors the layout does not list are an
// error, except exp_probs_b on a hash layer (DS4 files may carry it; it is unused there) and
// the MTP blocks' blk.<n_layer .. n_layer+n_nextn-1>.* (not trunk tensors: not looked at).
// With a layer range, only the tensors of the range (plus the embedding when it starts at
// layer 0 and the head when it ends with the output) must be present; the others may be absent
// (a split file) or present (they are not looked at).
void validate_tensors(const gguf::File& f, const ModelConfig& cfg,
                      const model::LayerRange& range);
inline void validate_tensors(const gguf::File& f, const ModelConfig& cfg) {
    validate_tensors(f, cfg, model::LayerRange::all(cfg.n_layer));
}
// Checks the tensors of one layer named from `prefix` (layer_tensor_layout) exactly as
// validate_tensors checks a trunk layer's: present, shape, type, tid2eid entries (and an unused
// exp_probs_b of a hash layer). Other tensors of the file, under the prefix or not, are not
// looked at (an MTP file's block sits beside its own projections). Throws ds4::Error naming
// the file and the tensor.
void validate_layer_tensors(const gguf::File& f, const ModelConfig& cfg, const std::string& prefix, LayerKind kind,
                            int layer);
// Checks one tensor of `f` against a spec (present, shape, type as validate_tensors checks a
// layout's): for tensors outside the trunk's layout, e.g. an MTP head's projections.
void validate_tensor(const gguf::File& f, const ModelConfig& cfg, const TensorSpec& s);
// Whether a tensor of the layout belongs to a range (its layer, or the embedding / the head).
bool in_range(const TensorSpec& s, const model::LayerRange& range);

// MTP heads (ARCHITECTURE.md §2.4, spec/ARCHITECTURE.md §2.4 and §7): one block of kind
// {ratio 0, non-hash} plus its input projections and head, beside a trunk of shape `cfg`.
// The specs record layer cfg.n_layer (the block's index in llama.cpp's layout). Allowed
// types are those of validate_tensors: Norm F32, every other class an engine weight format
// whose block divides the rows (upstream's loader is stricter: Q8_0 e/h projections and
// dense/shared matrices, F16/F32 hc and router, IQ2_XXS/Q2_K/Q4_K experts).
//
// Upstream's MTP support GGUF (general.architecture "deepseek4_mtp_support"), in its order:
//   mtp.0.hc_head_base.weight [hc] Norm, mtp.0.hc_head_fn.weight [hc*n_embd, hc] Hc,
//   mtp.0.hc_head_scale.weight [1] Norm, mtp.0.e_proj.weight, mtp.0.h_proj.weight
//   [n_embd, n_embd] MtpProj, mtp.0.enorm / hnorm / norm.weight [n_embd] Norm,
//   then layer_tensor_layout(cfg, "mtp.0.", cfg.n_layer, {0, false}).
inline constexpr const char* kMtpSupportArchitecture = "deepseek4_mtp_support";
std::vector<TensorSpec> mtp_support_layout(const ModelConfig& cfg);

// llama.cpp's layout (a main GGUF with block_count = n_layer + 1 and nextn_predict_layers = 1,
// or an MTP-only GGUF): block `block` (cfg.n_layer for the first MTP block) named "blk.<block>."
// holds layer_tensor_layout(cfg, prefix, block, {0, false}) plus
//   nextn.eh_proj.weight [2*n_embd, n_embd] MtpProj  (= [e_proj | h_proj] along the input dim:
//                                                     row r is e_proj row r then h_proj row r)
//   nextn.enorm.weight, nextn.hnorm.weight [n_embd] Norm
// and optionally nextn.shared_head_norm.weight [n_embd] Norm (the head's norm; llama.cpp falls
// back to output_norm), nextn.embed_tokens.weight [n_embd, n_vocab] Embd and
// nextn.shared_head_head.weight [n_embd, n_vocab] Output (absent: token_embd / output). The
// head's HC mix is the file's root output_hc_{fn,base,scale} (in a main GGUF the trunk's, so
// its MTP head shares them; in an MTP-only GGUF the MTP's own hc_head).
struct NextnLayout {
    std::vector<TensorSpec> required;
    std::vector<TensorSpec> optional;
};
NextnLayout mtp_embedded_layout(const ModelConfig& cfg, uint32_t block);

// Checks tensors of a layout in `f` as validate_tensors does (shape, type, tid2eid entries);
// a missing tensor is an error when `required`, else skipped. Throws ds4::Error naming the
// file and the tensor.
void validate_specs(const gguf::File& f, const ModelConfig& cfg, const std::vector<TensorSpec>& specs,
                    bool required = true);

}  // namespace ds4::deepseek4
