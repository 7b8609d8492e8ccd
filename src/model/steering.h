// Directional steering (docs/STEERING.md): a runtime edit of the sublayer outputs, and the
// capture of those outputs that builds a direction.
//
// A steering slot holds one unit direction v per layer, n_embd wide (the width of what an
// attention or FFN sublayer adds to the residual: DeepSeek V4's F before hc_post, GLM's y before
// x += y). With scale s for a sublayer, its output row F becomes
//
//     F -= s * v * (v . F)
//
// before it joins the residual: s = 1 removes the direction, s < 0 amplifies it, s = 0 leaves
// the pass untouched (the edit is skipped, so logits are bit-identical to no steering). Slots
// apply in order. Only trunk layers are edited (not the MTP / DSpark heads).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds4::model {

enum class Sublayer { Attention, Ffn };

struct SteeringSlot {
    std::vector<float> directions;  // [n_layer][n_embd], each row unit length (or all zero)
    float attn = 0.0f;              // scale after the attention output
    float ffn = 1.0f;               // scale after the FFN output
    std::string source;             // where the directions came from (messages)
};

struct Steering {
    uint32_t n_layer = 0;
    int64_t n_embd = 0;
    std::vector<SteeringSlot> slots;

    float scale(const SteeringSlot& s, Sublayer which) const { return which == Sublayer::Ffn ? s.ffn : s.attn; }
    // Whether any slot edits this sublayer (a non-zero scale).
    bool edits(Sublayer which) const;
    const float* direction(const SteeringSlot& s, uint32_t layer) const {
        return s.directions.data() + int64_t(layer) * n_embd;
    }
};

// Checks a direction matrix for a model of n_layer x n_embd: its size, finite values, and rows
// of unit length (within 1e-3) or all zero (a layer left alone). Throws ds4::Error naming
// `source` and what is wrong.
void check_directions(const std::vector<float>& dirs, uint32_t n_layer, int64_t n_embd, const std::string& source);

// The sublayer outputs of a sequence's last evaluated row, per layer (Sequence::
// set_sublayer_capture): what ds4-steer-build averages. Rows are written after the steering
// edit (none without steering); layers a call does not hold keep their old rows.
struct SublayerCapture {
    int64_t n_embd = 0;
    std::vector<float> attn;  // [n_layer][n_embd]
    std::vector<float> ffn;   // [n_layer][n_embd]
    std::vector<uint8_t> seen;  // [n_layer] 1 once a layer wrote its rows

    void reset(uint32_t n_layer, int64_t width) {
        n_embd = width;
        attn.assign(size_t(n_layer) * size_t(width), 0.0f);
        ffn.assign(size_t(n_layer) * size_t(width), 0.0f);
        seen.assign(n_layer, 0);
    }
};

}  // namespace ds4::model
