// The layers a process holds (docs/ARCHITECTURE.md, "Layer ranges"): an inclusive range of
// trunk layers, with the token embedding when it starts at layer 0 and the output head when it
// is written "A:output". The whole model is "0:output".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ds4::model {

struct LayerRange {
    uint32_t first = 0, last = 0;  // inclusive
    bool output = true;            // the output head runs here

    bool embedding() const { return first == 0; }
    bool contains(uint32_t layer) const { return layer >= first && layer <= last; }
    uint32_t count() const { return last - first + 1; }
    bool whole(uint32_t n_layer) const { return first == 0 && last + 1 == n_layer && output; }
    std::string str() const;  // "0:5", "6:output"

    static LayerRange all(uint32_t n_layer);
    // "A:B" (0 <= A <= B < n_layer) or "A:output"; an empty spec is the whole model. Throws
    // ds4::Error naming the spec and the allowed range.
    static LayerRange parse(std::string_view spec, uint32_t n_layer);

    bool operator==(const LayerRange&) const = default;
};

}  // namespace ds4::model
