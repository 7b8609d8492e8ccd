// DSpark, DeepSeek's block drafter for DeepSeek V4 (docs/SPECULATIVE.md, "DSpark"): S stages
// (trunk-shaped ratio-0 blocks) read the hidden states of a few trunk layers and propose up to
// block_size future tokens in one pass, with a previous-token (Markov) logit bias and a
// per-row confidence that cuts the block.
//
//   auto head = DsparkHead::open(*trunk, "dspark.gguf");
//   DsparkContext ctx = head->new_context();
//   // after the trunk evaluated rows at pos..pos+n-1 with BatchItem::capture = targets:
//   head->commit(ctx, pos, n, captured);      // [T][n][hidden_size], target order
//   DsparkBlock b = head->draft(ctx, p, x_p, 0.7f);   // p = ctx.end() - 1
//   // b.proposals[0] predicts position p+1 (the trunk's own next token), [1..b.cut) the rest
//
// The context rows. For a position t the trunk's state after each target layer L_j is averaged
// over the HC streams, f_j(t); c(t) = RMSNorm_{main_norm}(main_proj · [f_0(t) | … | f_{T-1}(t)]).
// Each stage keeps the KV row of c(t) (its hc_pre, attn_norm, attn_kv, kv norm, RoPE at t,
// FP8) for the `window()` positions before the block (the trunk's sliding window): a block at
// p attends to the context rows of p-W .. p-1 that the context holds, then its own rows.
//
// One block at p (the trunk has evaluated x_p at p): B+1 rows (c(p); x_p's embedding;
// noise_token's embedding B-1 times) at positions p, p, p+1, …, p+B-1, each in every HC stream,
// through the S stages; draft row d (block row 1+d) attends non-causally to the window and to
// all B+1 block rows, and only draft rows get the output, the FFN and hc_post (row 0 stays
// c(p)). The last stage's head (its hc_head_*, norm; the trunk's output matrix) gives h_d and
// the base logits ℓ_d; with prev_0 = x_p, s_d = markov_w1[prev_d], ℓ'_d = ℓ_d + markov_w2·s_d,
// y_d = argmax ℓ'_d (first on ties), prev_{d+1} = y_d; confidence σ(proj·[h_d | s_d]).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/deepseek4/extra_block.h"
#include "model/deepseek4/model.h"
#include "ops/matmul.h"

namespace ds4::deepseek4 {

// What a DSpark file declares (its metadata) and implies (its stages).
struct DsparkInfo {
    uint32_t stages = 0;          // S: mtp.0. … mtp.<S-1>.
    uint32_t block_size = 0;      // B: rows proposed per block
    uint32_t markov_rank = 0;     // R
    uint32_t noise_token = 0;     // fills the rows of not-yet-known tokens
    std::vector<uint32_t> target_layers;  // trunk layers read, strictly increasing
};

// One timeline's context rows (per stage, the KV rows of c(t)) for the positions
// [begin(), end()), at most window() + 1 of them: the block's own c(p) and the window before
// it. Made by DsparkHead::new_context and used with that head only.
class DsparkContext {
public:
    int64_t begin() const { return lo_; }
    int64_t end() const { return hi_; }
    // Drops the positions at or after pos (a rewind); those before stay.
    void truncate(int64_t pos);
    void clear() { lo_ = hi_ = 0; }

private:
    friend class DsparkHead;
    int64_t slots_ = 0;
    int64_t lo_ = 0, hi_ = 0;
    bool qat_ = true;
    std::vector<float> c_;   // [slots][n_embd]: c(t) at slot t mod slots
    std::vector<float> kv_;  // [stages][slots][head_dim]
};

// One block's results (rows d = 0 … B-1, row d predicting the token at p+d+1).
struct DsparkBlock {
    std::vector<float> base_logits;   // [B][n_vocab] ℓ_d
    std::vector<float> logits;        // [B][n_vocab] ℓ'_d along the greedy chain
    std::vector<float> hidden;        // [B][n_embd] h_d
    std::vector<int32_t> proposals;   // [B] y_d
    std::vector<float> confidence_logits;  // [B] κ_d
    std::vector<float> confidence;    // [B] σ(κ_d)
    int cut = 0;  // the longest prefix with confidence ≥ the threshold (B when it is ≤ 0)
};

// The DSpark metadata of `f` (each key as deepseek4.dspark.<k>, deepseek4.dspark_<k> or
// dspark.<k>), checked against a trunk of configuration `trunk`. Throws ds4::Error naming the
// file and the key.
DsparkInfo read_dspark_metadata(const gguf::File& f, const ModelConfig& trunk);

class DsparkHead {
public:
    // Reads and checks the metadata (each key as deepseek4.dspark.<k>, deepseek4.dspark_<k> or
    // dspark.<k>) and the tensors against the trunk (which must hold the whole model, or with
    // `output`, the trunk's output head bound elsewhere, a range from layer 0: mtp.h
    // output_head). Throws ds4::Error naming the file and the key or tensor.
    static std::unique_ptr<DsparkHead> open(Model& trunk, const std::string& path, const HeadWeights* output = nullptr);
    ~DsparkHead();

    const DsparkInfo& info() const { return info_; }
    const std::string& path() const { return file_->path(); }
    Model& trunk() const { return *trunk_; }
    const ExtraBlock& stage(uint32_t s) const { return *stages_.at(s); }
    // W: context positions a block sees before its own (the trunk's sliding window).
    int64_t window() const { return window_; }

    // qat: the FP8 round trip of the KV rows (as model::SequenceOptions::qat).
    DsparkContext new_context(bool qat = true) const;
    // The trunk evaluated rows at positions pos .. pos+n-1 (after truncating at pos: whatever
    // was there is gone); captured = their states after the target layers, [T][n][hc*n_embd].
    // A gap after end() starts the context afresh at pos. Only the last window()+1 rows are
    // computed.
    void commit(DsparkContext& ctx, int64_t pos, int64_t n, const float* captured);
    // The block at p (ctx must hold p: p = ctx.end() - 1) for token x_p = token. Throws
    // ds4::Error for a context without p or a bad token.
    DsparkBlock draft(const DsparkContext& ctx, int64_t p, int32_t token, float threshold);

    // The context's rows as bytes (a drafter section of a saved state, docs/STATE_FORMAT.md:
    // c(t) and every stage's KV row of its positions, with this head's fingerprint and shape),
    // and back into `ctx` for a sequence that holds `pos` positions. load_context empties ctx
    // and returns false for bytes of another DSpark file or shape, malformed ones, or rows
    // that do not end at pos.
    std::vector<uint8_t> save_context(const DsparkContext& ctx) const;
    bool load_context(DsparkContext& ctx, std::span<const uint8_t> bytes, int64_t pos) const;

private:
    DsparkHead() = default;
    void bind_tensors(const HeadWeights& output);
    void context_rows(const float* captured, int64_t n, int64_t stride, float* c);
    void context_kv(uint32_t s, const float* c, int64_t n, int64_t pos0, bool qat, float* kv);
    void run_stage(uint32_t s, const DsparkContext& ctx, int64_t p, float* X);
    void markov_chain(DsparkBlock& b, int32_t token, float threshold);

    Model* trunk_ = nullptr;
    std::unique_ptr<gguf::File> file_;
    uint64_t fingerprint_ = 0;  // of the file's tensors (names, types, shapes, the ends of the data)
    DsparkInfo info_;
    int64_t window_ = 0;
    std::vector<std::unique_ptr<ExtraBlock>> stages_;
    ops::Matrix main_proj;          // [n_embd, T*n_embd]
    const float* main_norm = nullptr;
    HeadWeights head;               // the last stage's hc_head_*, norm; the trunk's output
    ops::Matrix markov_w1, markov_w2;  // [n_vocab, R]
    std::vector<float> confidence;  // [n_embd + R], dequantized
};

}  // namespace ds4::deepseek4
