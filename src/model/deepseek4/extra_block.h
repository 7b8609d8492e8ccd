// Extra blocks (docs/ARCHITECTURE.md, "Extra blocks (the draft seam)"): transformer blocks
// outside the trunk's layer list, e.g. a speculative decoder's MTP layer, built from the same
// two sublayers as a trunk layer, with their own weights, routed experts and KV state, and run
// through the trunk Model (its lock, thread pool and workspace).
//
//   auto blk = ExtraBlock::bind(*trunk, trunk->file(), {.prefix = "blk.43.", .as_layer = 42});
//   auto s = blk->new_sequence({.ctx = 4096});
//   const model::BatchItem it{s.get(), tokens};
//   blk->eval(model::Batch(&it, 1), X);  // X [rows][hc][n_embd], in place; s advances
//
// A block is not a trunk layer: its sequences hold its one layer's state only, its rows are in
// no decision log, and the trunk's per-layer tables (ratios, states, resident experts) are not
// consulted for it. What it borrows from the trunk's configuration is the shape (n_embd, heads,
// experts, ...) and, from layer `as_layer`, the per-layer parameters that are not tensors
// (the SwiGLU clamps).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "gguf/reader.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/weights.h"
#include "model/expert_source.h"
#include "model/model.h"

namespace ds4::deepseek4 {

struct BlockRecipe {
    std::string prefix;     // its tensors' names: prefix + "attn_q_a.weight", ...; e.g. "mtp.0."
    uint32_t as_layer = 0;  // the trunk layer whose per-layer parameters it uses
    uint32_t ratio = 0;     // compression ratio: 0, 4 (with the indexer) or 128
    bool hash = false;      // routes by tid2eid[token] (no exp_probs_b)
};

class ExtraBlock {
public:
    // Checks recipe.prefix's tensors in `file` exactly as a trunk layer's (shape, type, tid2eid
    // entries: validate_layer_tensors) and binds them; `file` must hold them in memory (a file
    // loaded for a layer range or for expert streaming may not) and outlive the block. Throws
    // ds4::Error naming the file and the tensor.
    static std::unique_ptr<ExtraBlock> bind(Model& trunk, const gguf::File& file, BlockRecipe recipe);
    // The same from a file of its own (e.g. an MTP support GGUF), mapped and kept by the block.
    static std::unique_ptr<ExtraBlock> open(Model& trunk, const std::string& path, BlockRecipe recipe);
    ~ExtraBlock();

    const BlockRecipe& recipe() const { return recipe_; }
    const LayerWeights& weights() const { return w_; }
    Model& trunk() const { return *trunk_; }
    // Its routed experts (resident slices of its file), under the layer id recipe().as_layer.
    model::ExpertSource& experts() const { return *experts_; }

    // A timeline of this block: one layer's state for opt.ctx positions, rewindable within
    // opt.rewind_slack in O(1); clone/assign between sequences of this block.
    std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& opt) const;
    int64_t sequence_bytes(const model::SequenceOptions& opt) const;

    // Runs the block (attention then MoE sublayer) over the batch's rows: X is their HC state
    // [batch_rows(b)][hc][n_embd], updated in place; every item's sequence (one of this block's)
    // advances by its tokens. Items want no logits (a block has no head). Throws ds4::Error
    // before changing anything (Model::eval_block).
    void eval(model::Batch b, float* X) { trunk_->eval_block(*this, b, X); }

    // The checks of Model::check for this block's sequences, plus no logits wanted.
    void check(model::Batch b) const;

private:
    ExtraBlock() = default;

    Model* trunk_ = nullptr;
    std::unique_ptr<gguf::File> own_file_;  // open(): the block's file
    BlockRecipe recipe_;
    LayerWeights w_;
    std::unique_ptr<model::ExpertSource> experts_;
};

}  // namespace ds4::deepseek4
