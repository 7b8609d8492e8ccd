// --ssd-streaming-full-layers N (docs/SSD_STREAMING.md, "Full layers"): the routed experts of
// the first N routed layers read whole into memory at startup, the rest streamed through the
// expert cache. Upstream offers it for GLM, whose budget otherwise buys single experts across
// all layers; here it works for any family. The bytes are the file's, at the file's alignment
// within a 4 KiB block (as the cache's slots), so results are bit-identical to a resident run.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "model/expert_source.h"

namespace ds4::streaming {

// "N" (>= 0; 0: off) or "auto". Throws ds4::Error for anything else.
struct FullLayersRequest {
    bool automatic = false;
    int64_t layers = 0;
};
FullLayersRequest parse_full_layers(const std::string& text);
// A CLI11-style check: empty when `text` parses, else the reason.
std::string full_layers_error(const std::string& text);

// How many routed layers a request keeps resident out of a budget of `budget_slots` slots of
// `slot_bytes` each, for a model whose routed layers take `layer_bytes` each (`n_routed` of
// them, `n_expert` experts per layer). N is capped at n_routed. Auto: every layer when the
// budget holds all the experts, else as many as leave the cache two layers' experts (the
// prefill read-ahead's room), possibly none.
int64_t resolve_full_layers(const FullLayersRequest& req, int64_t budget_slots, uint64_t slot_bytes,
                            uint64_t layer_bytes, int64_t n_routed, int64_t n_expert);

// The routed layers of `layout` in order (those held).
std::vector<uint32_t> routed_layers(const model::ExpertFileLayout& layout);
// `layout` with `layers` no longer held: what the cache streams besides them.
model::ExpertFileLayout without_layers(model::ExpertFileLayout layout, std::span<const uint32_t> layers);

// Serves `layers` from memory and every other layer from `inner` (null when no other layer
// has routed experts). Read once in the constructor; throws ds4::Error naming the file, the
// layer and the part on a failed or short read.
class FullLayers final : public model::ExpertSource {
public:
    FullLayers(const model::ExpertFileLayout& layout, std::vector<uint32_t> layers,
               std::shared_ptr<model::ExpertSource> inner);
    ~FullLayers() override;
    FullLayers(const FullLayers&) = delete;
    FullLayers& operator=(const FullLayers&) = delete;

    void prepare(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows) override;
    model::ExpertWeights expert(uint32_t layer, int32_t e) const override;
    void release(uint32_t layer) override;
    size_t capacity() const override;
    bool wants_hints() const override { return inner_ && inner_->wants_hints(); }
    void hint(uint32_t layer, std::span<const int32_t> experts) override;

    uint64_t bytes() const { return bytes_; }  // expert bytes held in memory
    const std::vector<uint32_t>& layers() const { return layers_; }

private:
    bool full(uint32_t layer) const { return layer < full_.size() && full_[layer]; }

    model::ExpertFileLayout layout_;
    std::vector<uint32_t> layers_;
    std::vector<uint8_t> full_;                 // [n_layer]: served from memory
    std::vector<std::array<uint8_t*, 3>> mem_;  // [n_layer]: each part's buffer (null if not full)
    std::vector<std::array<size_t, 3>> mem_bytes_;
    std::shared_ptr<model::ExpertSource> inner_;
    uint64_t bytes_ = 0;
};

}  // namespace ds4::streaming
