// An optional record of the discrete decisions of a forward pass, for comparison with the
// oracle (tests/oracle) and for diagnostics. Attached to a Sequence; positions are absolute.
#pragma once

#include <cstdint>
#include <vector>

namespace ds4::model {

struct DecisionLog {
    // Per evaluated position and layer: chosen expert ids (in selection order).
    std::vector<std::vector<std::vector<int32_t>>> experts;   // [pos][layer][k]
    // Per position and ratio-4 layer: selected compressed rows (ascending), only when the
    // indexer had to choose (more visible rows than top-k).
    std::vector<std::vector<std::vector<int32_t>>> indexer;   // [pos][layer][...]
    // How close each routed (non-hash) expert choice was: the biased score of the last chosen
    // expert minus that of the best one left out (>= 0). NaN for hash layers.
    std::vector<std::vector<float>> expert_margin;            // [pos][layer]
};

}  // namespace ds4::model
