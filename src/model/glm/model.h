// GLM 5.2 (GGUF architecture "glm-dsa") on the CPU behind the family-neutral interface of
// model/model.h: absorbed MLA attention with the DSA indexer's top-k, dense then routed FFNs,
// plain residuals (config.h; docs/ARCHITECTURE.md, "Model families").
//
//   auto m = glm::Model::load("glm52.gguf", {.threads = 2});
//   model::Session s(*m, {.ctx = 4096});
//   s.eval(tokens, &logits);
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/expert_source.h"
#include "model/glm/config.h"
#include "model/glm/weights.h"
#include "model/model.h"
#include "ops/rope.h"

namespace ds4::blocks {
struct Workspace;
}

namespace ds4::glm {

class MtpHead;

class Model final : public model::Model {
public:
    // Opens, validates (metadata and every tensor of the range) and binds opt.layers (all by
    // default). A range must start at a layer that computes its own top-k (the shared layers
    // after it reuse that choice within the call). Throws ds4::Error naming the file and the
    // key or tensor.
    static std::unique_ptr<Model> load(const std::string& path, const model::OpenOptions& opt = {});
    ~Model() override;

    const GlmConfig& config() const { return cfg_; }
    const Weights& weights() const { return w_; }
    const gguf::File& file() const override { return *file_; }
    const ops::Rope& rope() const { return *rope_; }
    model::ExpertSource& experts() const { return *experts_; }
    const std::array<uint8_t, 16>& layer_hash(uint32_t il) const { return layer_hash_.at(il); }

    const model::ModelInfo& info() const override { return info_; }
    std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& opt) const override;
    int64_t sequence_bytes(const model::SequenceOptions& opt) const override;
    void embed(model::Batch b, float* hidden) override;
    void eval_layers(model::Batch b, float* hidden) override;
    void head(model::Batch b, const float* hidden) override;
    void eval(model::Batch b) override;
    std::vector<uint8_t> save_state(const model::Sequence& seq, std::span<const float> logits = {}) const override;
    void load_state(std::span<const uint8_t> bytes, model::Sequence& seq,
                    std::vector<float>* logits = nullptr) const override;
    void set_expert_source(std::shared_ptr<model::ExpertSource> source) override;
    std::shared_ptr<model::ExpertSource> expert_source() const override { return experts_; }
    model::ExpertFileLayout expert_layout() const override;

private:
    friend class MtpHead;  // runs its block and head under this model's lock, pool and workspace
    explicit Model(int threads);
    void check(model::Batch b, bool advancing) const;
    void embed_unlocked(model::Batch b, float* X);
    void layers_unlocked(model::Batch b, float* X);
    void head_unlocked(model::Batch b, const float* X);

    std::unique_ptr<gguf::File> file_;
    GlmConfig cfg_;
    Weights w_;
    model::ModelInfo info_;
    std::vector<std::array<uint8_t, 16>> layer_hash_;
    std::unique_ptr<ops::Rope> rope_;
    std::shared_ptr<model::ExpertSource> experts_;
    std::mutex mu_;
    std::unique_ptr<blocks::Workspace> ws_;
};

// The configuration derived from a glm-dsa file, as --inspect prints it; throws ds4::Error when
// the engine cannot run the file.
std::string describe(const gguf::File& f);

}  // namespace ds4::glm
