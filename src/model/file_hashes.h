// What a family's loader computes about its file (family-neutral): the metadata hash a saved
// state must match, the per-layer weight hashes, which tensors a layer range or SSD streaming
// loads, and the expert source a streaming model starts with.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "gguf/reader.h"
#include "model/expert_source.h"
#include "model/layer_range.h"

namespace ds4::model {

// The metadata key a split file records its layer range under (not part of the model's math).
inline constexpr const char* kSplitLayersKey = "ds4.split.layers";

// XXH3-128 of every metadata key and value but general.* (general.architecture stays in) and
// the split key: equal for every range of one model and its split files.
std::array<uint8_t, 16> metadata_hash(const gguf::File& f);
// XXH3-128 of the tensors named "blk.<il>.*": name, type, shape and 64 bytes at each end of the
// data (read from `path` for tensors the load did not keep in memory, e.g. streamed experts).
std::array<uint8_t, 16> layer_hash(const gguf::File& f, const std::string& path, uint32_t il);
// The same over every tensor of the file (those not in memory read from f.path()): what tells
// two files of one layout apart, e.g. to keep their disk KV caches apart.
std::array<uint8_t, 16> weights_hash(const gguf::File& f);

// Whether a Copy load of `range` reads the tensor: blk.N.* of its layers, the embedding when it
// starts at layer 0, the head's tensors ("output*") when it ends with the output.
bool tensor_in_range(const std::string& name, const LayerRange& r);
// The routed-expert tensors (ffn_{gate,up,down}_exps), which SSD streaming leaves on disk.
bool is_routed_expert(const std::string& name);

// Where the routed experts of the layers marked in `held` lie in `f` (layers[il]: the layer's
// bound gate/up/down stacks); checks each tensor holds n_expert experts.
ExpertFileLayout expert_file_layout(const gguf::File& f, int64_t n_expert, int64_t n_used,
                                    std::span<const LayerExperts> layers, std::span<const uint8_t> held);

// The expert source of a model opened for streaming until the caller sets one: refuses.
class NoExperts final : public ExpertSource {
public:
    void prepare(uint32_t layer, std::span<const int32_t>, std::span<const int32_t>) override;
    ExpertWeights expert(uint32_t layer, int32_t e) const override;
};

}  // namespace ds4::model
