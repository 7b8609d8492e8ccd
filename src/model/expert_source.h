// Where a MoE model's routed-expert weights come from (docs/ARCHITECTURE.md, "Expert source").
// The forward pass routes a layer's rows first, then tells the source which experts the rows
// chose (prepare), then runs the expert products with the matrices expert() returns, then
// releases the layer. Resident weights (the default) are slices of the loaded GGUF; a streaming
// source (SSD streaming) fetches the missing experts in prepare() and may prefetch.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
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
    // ascending, and how many rows chose each (rows[i] for experts[i]; a source may use it
    // as route hotness). Each must be available through expert() until release(layer). At
    // most capacity() experts are prepared at once: when a call's rows chose more, the model
    // runs the layer's experts in groups (prepare, products, release per group), which gives
    // the same results bit for bit.
    virtual void prepare(uint32_t layer, std::span<const int32_t> experts,
                         std::span<const int32_t> rows) = 0;
    virtual ExpertWeights expert(uint32_t layer, int32_t e) const = 0;
    // The layer's (or the group's) expert products are done.
    virtual void release(uint32_t layer) {}
    // The most experts one prepare() may announce.
    virtual size_t capacity() const { return std::numeric_limits<size_t>::max(); }

    // Lookahead (decode): whether the source uses hint(); the model computes no forecast
    // for a source that does not.
    virtual bool wants_hints() const { return false; }
    // A forecast, not a promise: the next prepare(layer, ...) will probably ask for (some
    // of) `experts` (distinct, ascending). Given while the previous layer's experts are
    // prepared, so a streaming source can read these while that layer computes. Results never
    // depend on hints: prepare() still makes exactly what it announces available.
    virtual void hint(uint32_t layer, std::span<const int32_t> experts) {}
};

// Where one routed-expert tensor of a layer lies in the model file, for sources that read the
// experts themselves (SSD streaming): expert e is the `expert_bytes` bytes at
// offset + e * expert_bytes, rows_per_expert rows of `cols` values of `type`.
struct ExpertTensorFile {
    TensorType type = TensorType::F32;
    int64_t rows_per_expert = 0, cols = 0;
    size_t row_bytes = 0;
    uint64_t offset = 0;        // absolute byte offset of expert 0 in the file
    uint64_t expert_bytes = 0;
};

// The routed experts of a model's file: per layer gate, up and down (layers outside the
// model's range, or without routed experts, have held = false).
struct ExpertFileLayout {
    std::string path;
    uint64_t file_size = 0;
    int64_t n_expert = 0, n_expert_used = 0;
    struct Layer {
        bool held = false;
        std::array<ExpertTensorFile, 3> parts;  // gate, up, down
        uint64_t expert_bytes() const { return parts[0].expert_bytes + parts[1].expert_bytes + parts[2].expert_bytes; }
    };
    std::vector<Layer> layers;  // [n_layer]
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
    void prepare(uint32_t, std::span<const int32_t>, std::span<const int32_t>) override {}
    ExpertWeights expert(uint32_t layer, int32_t e) const override {
        const LayerExperts& l = layers_.at(layer);
        return {l.gate.expert(e), l.up.expert(e), l.down.expert(e)};
    }

private:
    std::vector<LayerExperts> layers_;
};

}  // namespace ds4::model
