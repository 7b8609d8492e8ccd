// Where a MoE model's routed-expert weights come from (docs/ARCHITECTURE.md, "Expert source").
// The forward pass routes a layer's rows first, then tells the source which experts the rows
// chose (prepare), then runs the expert products with the matrices expert() returns, then
// releases the layer. Resident weights (the default) are slices of the loaded GGUF; a streaming
// source (SSD streaming) fetches the missing experts in prepare() and may prefetch.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/error.h"
#include "ops/matmul.h"

namespace ds4::model {

// A 3-D expert tensor ne=[cols, rows, n_expert]: expert e is a contiguous [rows][cols] slab.
struct ExpertMatrix {
    ops::Matrix all;  // rows = n_expert * rows_per_expert
    int64_t rows_per_expert = 0;
    int64_t n_expert() const { return rows_per_expert ? all.rows / rows_per_expert : 0; }
    ops::Matrix expert(int64_t e) const { return all.slice_rows(e * rows_per_expert, rows_per_expert); }
};

// One expert's matrices: gate and up [ff][n_embd], down [n_embd][ff].
struct ExpertWeights {
    ops::Matrix gate, up, down;
};

class ExpertSource {
public:
    virtual ~ExpertSource() = default;
    // Before any expert product of `layer` in a call: the distinct experts its rows chose,
    // ascending. Each must be available through expert() until release(layer).
    virtual void prepare(uint32_t layer, std::span<const int32_t> experts) = 0;
    virtual ExpertWeights expert(uint32_t layer, int32_t e) const = 0;
    // The layer's expert products are done.
    virtual void release(uint32_t layer) {}
};

// The three expert tensors of one MoE layer.
struct LayerExperts {
    ExpertMatrix gate, up, down;
};

// Experts that are slices of resident tensors (the mapped or read GGUF): prepare() has
// nothing to fetch.
class ResidentExperts final : public ExpertSource {
public:
    // layers[il]: layer il's tensors (empty for layers this model does not hold).
    explicit ResidentExperts(std::vector<LayerExperts> layers) : layers_(std::move(layers)) {}
    void prepare(uint32_t layer, std::span<const int32_t> experts) override {}
    ExpertWeights expert(uint32_t layer, int32_t e) const override {
        const LayerExperts& l = layers_.at(layer);
        return {l.gate.expert(e), l.up.expert(e), l.down.expert(e)};
    }

private:
    std::vector<LayerExperts> layers_;
};

}  // namespace ds4::model
