// DeepSeek V4 (GGUF architecture "deepseek4") on the CPU: the loaded, validated model
// (spec/ARCHITECTURE.md; docs/ARCHITECTURE.md) behind the family-neutral interface of
// model/model.h.
//
//   auto m = deepseek4::Model::load("ds4flash.gguf", {.threads = 2});
//   model::Session s(*m, {.ctx = 4096});      // one timeline (model/session.h)
//   s.eval(tokens, &logits);                   // prefill (chunked), logits of the last position
//
// or, several sequences in one pass: m->eval(batch) with model::BatchItem rows.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/weights.h"
#include "model/expert_source.h"
#include "model/model.h"
#include "ops/rope.h"

namespace ds4::blocks {
struct Workspace;
}

namespace ds4::deepseek4 {

class DsparkHead;
class ExtraBlock;
class MtpHead;

// An output head (§3.6): the HC streams weighted into one (hc_fn/base/scale), the final norm,
// the vocabulary projection. The trunk's comes from the output_* tensors; an MTP head brings
// its own HC weights and norm and shares the projection.
struct HeadWeights {
    ops::Matrix hc_fn;                 // [hc, hc*n_embd]
    const float* hc_base = nullptr;    // [hc]
    const float* hc_scale = nullptr;   // [1]
    const float* norm = nullptr;       // [n_embd]
    ops::Matrix output;                // [n_vocab, n_embd]
};

class Model final : public model::Model {
public:
    // Opens, validates (metadata, and the shape/type of every tensor of the range) and binds
    // the tensors of opt.layers (all by default). With Load::Copy only the range's tensors are
    // read into memory; with opt.stream_experts, only the range's non-routed tensors (the
    // routed experts are served by the expert source the caller sets, which starts as one
    // that refuses every expert). Throws ds4::Error naming the file and the key or tensor.
    static std::unique_ptr<Model> load(const std::string& path, const model::OpenOptions& opt = {});
    ~Model() override;

    const ModelConfig& config() const { return cfg_; }
    const Weights& weights() const { return w_; }
    const gguf::File& file() const override { return *file_; }
    // RoPE of layer il: plain for ratio-0 layers, compressed base + YaRN otherwise; and of
    // any block by its compression ratio.
    const ops::Rope& rope(uint32_t il) const { return rope_for_ratio(int(cfg_.compress_ratio(il))); }
    const ops::Rope& rope_for_ratio(int ratio) const { return ratio == 0 ? *rope_plain_ : *rope_compressed_; }
    model::ExpertSource& experts() const { return *experts_; }
    // XXH3-128 of the layer's tensors (name, type, shape, and 64 bytes at each end of the
    // data): a saved layer state only loads into a layer with the same weights.
    const std::array<uint8_t, 16>& layer_hash(uint32_t il) const { return layer_hash_.at(il); }

    // model::Model
    const model::ModelInfo& info() const override { return info_; }
    std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& opt) const override;
    int64_t sequence_bytes(const model::SequenceOptions& opt) const override;
    void embed(model::Batch b, float* hidden) override;
    void eval_layers(model::Batch b, float* hidden) override;
    void head(model::Batch b, const float* hidden) override;
    void eval(model::Batch b) override;
    // (Defaults as in model::Model.)
    std::vector<uint8_t> save_state(const model::Sequence& seq,
                                    std::span<const float> logits = {}) const override;
    void load_state(std::span<const uint8_t> bytes, model::Sequence& seq,
                    std::vector<float>* logits = nullptr) const override;
    void set_expert_source(std::shared_ptr<model::ExpertSource> source) override;
    std::shared_ptr<model::ExpertSource> expert_source() const override { return experts_; }
    model::ExpertFileLayout expert_layout() const override;

    // Runs an extra block bound to this model (extra_block.h: ExtraBlock::eval) with this
    // model's lock, pool and workspace.
    void eval_block(const ExtraBlock& block, model::Batch b, float* X);
    // The trunk's output head (the range must end with it).
    HeadWeights head_weights() const;

private:
    friend class MtpHead;     // runs its projections, block and head under this model's lock
    friend class DsparkHead;  // runs its stages and head under this model's lock
    explicit Model(int threads);
    // Checks a batch before anything changes: sequences of this model, each once, token ids
    // in the vocabulary, room in every context. `advancing`: rows will be appended.
    void check(model::Batch b, bool advancing) const;
    void embed_unlocked(model::Batch b, float* hidden);
    void layers_unlocked(model::Batch b, float* hidden);
    void head_unlocked(model::Batch b, const float* hidden);
    void block_unlocked(const ExtraBlock& block, model::Batch b, float* X);
    // logits out[t] of the HC state rows in[t] through head h; `normed` (may be null): the
    // rows' final normed hidden states [in.size()][n_embd] (what the projection reads).
    void head_rows(const HeadWeights& h, std::span<const float* const> in, std::span<float* const> out,
                   float* normed = nullptr);

    std::unique_ptr<gguf::File> file_;
    ModelConfig cfg_;
    Weights w_;
    model::ModelInfo info_;
    std::vector<std::array<uint8_t, 16>> layer_hash_;  // [n_layer], zero outside the range
    std::unique_ptr<ops::Rope> rope_plain_, rope_compressed_;
    std::shared_ptr<model::ExpertSource> experts_;
    std::mutex mu_;                   // one call at a time: the pool and the workspace are shared
    std::unique_ptr<blocks::Workspace> ws_;
};

// The configuration the engine derives from a deepseek4 file, as --inspect prints it; throws
// ds4::Error when the engine cannot run the file.
std::string describe(const gguf::File& f);

}  // namespace ds4::deepseek4
