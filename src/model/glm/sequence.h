// A GLM 5.2 timeline's state: per layer of the model's range, every position's latent KV row
// (kv_lora normed values then the rope part roped: the attention's key, whose first kv_lora
// values are its value) and, on layers that compute their own top-k, every position's indexer
// key. Nothing is pooled or windowed, so any rewind is O(1).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/huge_pages.h"
#include "model/glm/config.h"
#include "model/model.h"
#include "model/state_file.h"

namespace ds4::glm {

class Model;

inline constexpr int64_t kMaxContext = int64_t(1) << 40;

struct LayerState {
    LayerState(const GlmConfig& c, uint32_t il, int64_t ctx);
    // A block outside the trunk (the MTP block): latent rows, and indexer rows of index_dim.
    LayerState(int64_t key_dim, int64_t index_dim, int64_t ctx);
    static int64_t bytes_for(const GlmConfig& c, uint32_t il, int64_t ctx);
    int64_t bytes() const;
    int64_t used_bytes(int64_t pos) const;

    int64_t key_dim = 0, index_dim = 0;  // index_dim 0: a shared-indexer layer
    float* kv_row(int64_t p) { return &kv[size_t(p * key_dim)]; }
    const float* kv_row(int64_t p) const { return &kv[size_t(p * key_dim)]; }
    float* index_row(int64_t p) { return &index[size_t(p * index_dim)]; }
    UntouchedVector<float> kv;     // [ctx][key_dim]
    UntouchedVector<float> index;  // [ctx][index_dim]
};

// A layer's section of a state file (docs/STATE_FORMAT.md, "GLM"): pos latent rows, then pos
// indexer rows on a full layer. read_layer_section checks the counts before it allocates.
void write_layer_section(model::StateWriter& w, const LayerState& L, int64_t pos);
void read_layer_section(model::StateReader& r, uint32_t il, int64_t pos, LayerState& L);

class Sequence final : public model::Sequence {
public:
    Sequence(const Model& model, model::SequenceOptions opt);

    bool can_rewind(int64_t n) const override { return n >= 0 && n <= pos(); }
    void rewind(int64_t n) override;
    void clear() override { tokens_.clear(); }
    int64_t state_bytes() const override;
    int64_t state_bytes_used() const override;
    std::unique_ptr<model::Sequence> clone() const override;
    void assign(const model::Sequence& other) override;

    const Model& owner() const { return *model_; }
    LayerState& layer(uint32_t il) { return layers_[il - first_]; }
    const LayerState& layer(uint32_t il) const { return layers_[il - first_]; }
    void append_tokens(std::span<const int32_t> t) { tokens_.insert(tokens_.end(), t.begin(), t.end()); }
    void set_tokens(std::vector<int32_t> t) { tokens_ = std::move(t); }

private:
    Sequence(const Sequence&) = default;

    const Model* model_;
    uint32_t first_ = 0;
    std::vector<LayerState> layers_;
};

}  // namespace ds4::glm
