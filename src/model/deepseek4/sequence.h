// A DeepSeek V4 timeline's state (spec/ARCHITECTURE.md §4.1; docs/ARCHITECTURE.md):
// per layer of the model's range, the raw sliding window, the compressed attention rows, the
// indexer's compressed rows and the compressors' open windows.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/huge_pages.h"
#include "model/deepseek4/compressor.h"
#include "model/deepseek4/config.h"
#include "model/deepseek4/weights.h"
#include "model/model.h"
#include "model/state_file.h"

namespace ds4::deepseek4 {

class Model;

// The longest context a sequence may have (2^40 positions: sizes stay far from overflow).
inline constexpr int64_t kMaxContext = int64_t(1) << 40;

// Per-layer KV state (§4.1).
struct LayerState {
    // `slack`: how many positions rewind() can go back without recomputation.
    LayerState(const ModelConfig& c, const LayerWeights& w, int64_t ctx, int64_t slack);
    LayerState(const LayerState& o);
    LayerState& operator=(const LayerState& o);
    // What the constructor would allocate, without allocating.
    static int64_t bytes_for(const ModelConfig& c, uint32_t ratio, int64_t ctx, int64_t slack);
    void reset();
    // Whether the state after positions 0..n-1 is still recoverable from this one (n <= the
    // positions fed so far), and the rewind itself: the raw ring and the compressor rings
    // still hold what position n needs, and compressed rows past n are dropped.
    bool can_rewind(int64_t n, int64_t pos) const;
    void rewind(int64_t n);
    int64_t bytes() const;
    int64_t used_bytes(int64_t pos) const;  // with positions 0..pos-1 fed

    int ratio = 0;
    int64_t window = 0, head_dim = 0, indexer_dim = 0;
    int64_t raw_slots = 0;              // window + slack (at most the context)
    int64_t raw_valid_from = 0;         // first position whose raw row the ring holds (> 0 after a state load)
    const float* raw_row(int64_t p) const { return &raw[size_t((p % raw_slots) * head_dim)]; }
    float* raw_row(int64_t p) { return &raw[size_t((p % raw_slots) * head_dim)]; }
    std::vector<float> raw;             // [raw_slots][head_dim], position p at slot p mod raw_slots
    UntouchedVector<float> comp;        // [ctx/ratio + 1][head_dim] attention compressed cache
    int64_t n_comp = 0;
    UntouchedVector<float> index_comp;  // [ctx/4 + 1][indexer_dim] indexer compressed cache (ratio 4)
    int64_t n_index_comp = 0;
    CompressorState compressor, index_compressor;
};

// A layer's section of a state file (docs/STATE_FORMAT.md; state_sections.cpp), for a sequence
// at position `pos`. read_layer_section fills a fresh LayerState (sized for a context of at
// least pos) and throws ds4::Error, through the reader, on anything inconsistent.
void write_layer_section(model::StateWriter& w, const LayerState& L, int64_t pos);
void read_layer_section(model::StateReader& r, uint32_t il, int64_t pos, LayerState& L);

class Sequence final : public model::Sequence {
public:
    Sequence(const Model& model, model::SequenceOptions opt);

    bool can_rewind(int64_t n) const override;
    void rewind(int64_t n) override;
    void clear() override;
    int64_t state_bytes() const override;
    int64_t state_bytes_used() const override;
    std::unique_ptr<model::Sequence> clone() const override;
    void assign(const model::Sequence& other) override;

    const Model& owner() const { return *model_; }
    // Layer il's state (il in the model's range).
    LayerState& layer(uint32_t il) { return layers_[il - first_]; }
    const LayerState& layer(uint32_t il) const { return layers_[il - first_]; }
    // The forward pass appends the tokens it evaluated; state loading sets them.
    void append_tokens(std::span<const int32_t> t) { tokens_.insert(tokens_.end(), t.begin(), t.end()); }
    void set_tokens(std::vector<int32_t> t) { tokens_ = std::move(t); }

private:
    Sequence(const Sequence&) = default;

    const Model* model_;
    uint32_t first_ = 0;
    std::vector<LayerState> layers_;  // the range's layers, first_ .. last
};

}  // namespace ds4::deepseek4
