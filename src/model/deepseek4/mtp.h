// The MTP (multi-token prediction) head of DeepSeek V4 (spec/ARCHITECTURE.md §7; docs/SPECULATIVE.md):
// one extra transformer block that predicts the token after next from the trunk's final hidden
// state and the next token, used as a speculative drafter.
//
// Row at position p pairs the trunk's hidden state h_{p-1} (its HC state after the last layer,
// before the output head; zeros for p = 0) with token x_p, at rope position p, and its logits
// predict x_{p+1} (llama.cpp's and the V3 paper's pairing):
//   e = RMSNorm_enorm(token_embd[x_p]),  h'_k = RMSNorm_hnorm(h_k)  (per HC stream k)
//   X_k = e_proj·e + h_proj·h'_k         (or eh_proj·[e | h'_k] in llama.cpp's layout)
//   X = block(X)                         (ratio 0: raw window only, rope base without YaRN)
//   logits = output · RMSNorm_norm(hc_head(X))
// Recursive drafts feed the head's own output X as the next row's h.
//
// Two file layouts:
//   - upstream's MTP support GGUF: mtp.0.{e_proj,h_proj,enorm,hnorm,norm,hc_head_fn,
//     hc_head_base,hc_head_scale}.weight plus a block's tensors under "mtp.0.";
//   - llama.cpp's: blk.L.* (L = the trunk's layer count) with blk.L.nextn.{eh_proj,enorm,hnorm,
//     shared_head_norm?,shared_head_head?,embed_tokens?}.weight, in the main GGUF or an MTP-only
//     one; its HC head is the root output_hc_* of that file.
// The token embedding and the output projection are the trunk's unless the file has its own.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "gguf/reader.h"
#include "model/deepseek4/extra_block.h"
#include "model/deepseek4/model.h"
#include "model/model.h"
#include "ops/matmul.h"

namespace ds4::deepseek4 {

// The trunk's output head (output_hc_*, output_norm, output) bound from `f`, a mapping of the
// model file, checked by shape and type: for a drafter on a process whose layers end before the
// head (a pipeline coordinator). Throws ds4::Error naming the file and the tensor.
HeadWeights output_head(const gguf::File& f, const ModelConfig& cfg);

// A drafter head's trunk: `trunk` holds the embedding (its range starts at layer 0); `output`
// null means it holds the head too (the whole model). Throws ds4::Error naming `path`.
void check_drafter_trunk(const Model& trunk, const HeadWeights* output, const std::string& path, const char* what);

class MtpHead {
public:
    enum class Layout { Support, NextN };

    // From a file in either layout (the trunk's own file works too: see embedded()). The
    // trunk must hold the whole model (embedding and head), or, with `output` (the trunk's
    // output head bound elsewhere: output_head()), a range from layer 0 (a pipeline
    // coordinator's). Throws ds4::Error naming the file and the tensor.
    static std::unique_ptr<MtpHead> open(Model& trunk, const std::string& path, const HeadWeights* output = nullptr);
    // The head embedded in the trunk's own file (blk.<n_layer>.nextn.*); nullptr when it has
    // none.
    static std::unique_ptr<MtpHead> embedded(Model& trunk, const HeadWeights* output = nullptr);
    ~MtpHead();

    Layout layout() const { return layout_; }
    const std::string& path() const { return file_->path(); }
    Model& trunk() const { return *trunk_; }
    const ExtraBlock& block() const { return *block_; }

    // A timeline of the head: its block's raw window for opt.ctx positions.
    std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& opt) const;
    int64_t sequence_bytes(const model::SequenceOptions& opt) const { return block_->sequence_bytes(opt); }

    // Rows i = 0..n-1 at the sequence's next positions: tokens[i] paired with h[i]
    // ([hidden_size] floats each). Writes out_hidden [rows][hidden_size] (may be null) and
    // logits [rows][n_vocab] (may be null: none computed), rows = n (want All) or the last row
    // only (Last). The sequence advances by n. Throws ds4::Error before changing anything (a
    // sequence of another head, a bad token, a full context).
    void eval(model::Sequence& seq, std::span<const int32_t> tokens, const float* h, float* out_hidden,
              float* logits, model::Logits want = model::Logits::All);

private:
    MtpHead() = default;
    static std::unique_ptr<MtpHead> bind(Model& trunk, const gguf::File& file, Layout layout,
                                         const HeadWeights* output);
    void project(std::span<const int32_t> tokens, const float* h, float* X) const;

    Model* trunk_ = nullptr;
    std::unique_ptr<gguf::File> own_file_;  // open() of another file than the trunk's
    const gguf::File* file_ = nullptr;
    Layout layout_ = Layout::Support;
    std::unique_ptr<ExtraBlock> block_;
    ops::Matrix e_proj, h_proj;  // Support
    ops::Matrix eh_proj;         // NextN: [n_embd, 2*n_embd]
    const float* enorm = nullptr;
    const float* hnorm = nullptr;
    ops::Matrix embed;           // [n_vocab, n_embd]
    HeadWeights head;
};

}  // namespace ds4::deepseek4
