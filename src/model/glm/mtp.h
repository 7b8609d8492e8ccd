// GLM 5.2's embedded MTP (multi-token prediction) block, llama.cpp's layout blk.<L>.nextn.* in
// the main GGUF (L = the trunk's layer count): one full routed GLM layer that predicts the token
// after next, a speculative drafter (docs/SPECULATIVE.md, "GLM").
//
// Row at position p pairs the trunk's output-normed hidden state h_{p-1} (RMSNorm_output_norm of
// its last layer's output; zeros for p = 0) with token x_p, at rope position p, as llama.cpp's
// glm-dsa MTP graph does:
//   X = eh_proj [RMSNorm_enorm(embed[x_p]) | RMSNorm_hnorm(h_{p-1})]
//   X += attention(X)   (absorbed MLA over every earlier row of the head's own sequence: the
//                        block's indexer, if the file has one, is not used)
//   X += ffn(X)         (routed experts + shared, as a trunk layer)
//   h' = RMSNorm_{shared_head_norm, else output_norm}(X)  -> the next draft's h
//   logits = (shared_head_head, else output) h'
// embed is nextn.embed_tokens when the file has it, else token_embd.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "model/glm/model.h"
#include "model/glm/weights.h"
#include "model/model.h"
#include "ops/matmul.h"

namespace ds4::glm {

class MtpHead {
public:
    // The block in the trunk's own file; nullptr when it has none (nextn_predict_layers 0 or
    // no blk.<L>.nextn.eh_proj). The trunk must hold the whole model, its tensors in memory
    // (not opened for SSD streaming). Throws ds4::Error naming the tensor when the block is
    // malformed.
    static std::unique_ptr<MtpHead> embedded(Model& trunk);
    ~MtpHead();

    Model& trunk() const { return *trunk_; }
    // The head's own timeline: the block's latent rows for opt.ctx positions.
    std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& opt) const;
    int64_t sequence_bytes(const model::SequenceOptions& opt) const;

    // The output-normed rows the head reads from the trunk's raw hidden rows X [n][n_embd]
    // (what model::BatchItem::hidden gives): out [n][n_embd].
    void trunk_rows(const float* X, int64_t n, float* out) const;

    // Rows i = 0..n-1 at the sequence's next positions: tokens[i] with h[i] (output-normed,
    // [n_embd] each). Writes out_hidden [rows][n_embd] (h'; may be null) and logits
    // [rows][n_vocab] (may be null: none computed), rows = n (All, None) or the last (Last). The sequence advances by n. Throws ds4::Error
    // before anything changes (a sequence of another head, a bad token, a full context).
    void eval(model::Sequence& seq, std::span<const int32_t> tokens, const float* h, float* out_hidden,
              float* logits, model::Logits want = model::Logits::All);

private:
    MtpHead() = default;

    Model* trunk_ = nullptr;
    uint32_t layer_ = 0;  // L
    LayerWeights block_;
    ops::Matrix eh_proj;  // [n_embd, 2*n_embd]
    const float* enorm = nullptr;
    const float* hnorm = nullptr;
    const float* norm = nullptr;  // shared_head_norm or output_norm
    ops::Matrix embed;            // [n_vocab, n_embd]
    ops::Matrix head;             // [n_vocab, n_embd]
    std::shared_ptr<model::ExpertSource> experts_;
};

}  // namespace ds4::glm
