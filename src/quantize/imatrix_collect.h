// Collecting an importance matrix (docs/QUANTIZE.md, "Collecting an imatrix"): per layer and
// routed expert, the mean square per input column of what the expert's matrices multiply,
// counting only the tokens routed to that expert:
//
//   ffn_gate_exps / ffn_up_exps   the normalised FFN input x            (n_embd columns)
//   ffn_down_exps                 the route-weighted SwiGLU row w_k * h  (ff columns)
//
// and of the shared expert's (every token): ffn_gate_shexp / ffn_up_shexp (x) and
// ffn_down_shexp (its SwiGLU row). Sums are float, accumulated in the order rows arrive (token
// order), as upstream's and llama.cpp's collectors do.
//
// The result is an Imatrix (quantize/imatrix.h) whose routed entries hold n_expert * columns
// values (expert e at e * columns, the slices Imatrix::weights() gives the quantizer), written
// as llama.cpp's legacy .dat with ncall 1. An expert with fewer observations than the minimum
// (by default: none) gets 1 in every column, "no information", as upstream and llama.cpp
// write it.
//
// The text of a calibration dataset is split as upstream's collector splits it: a prompt is
// the text after a line that contains "===== DS4_IMATRIX_PROMPT" up to the next such line,
// trimmed of surrounding white space; text before the first marker is ignored, and a file with
// no marker is one prompt. Empty prompts are dropped.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "quantize/imatrix.h"

namespace ds4::quantize {

// The prompts of a dataset's text, in order.
std::vector<std::string> imatrix_prompts(const std::string& text);

class ImatrixCollector {
public:
    // Experts with fewer than min_expert_samples observations are written as 1s.
    explicit ImatrixCollector(int64_t min_expert_samples = 1) : min_samples_(min_expert_samples) {}

    // One token's routed expert `expert` (of n_expert) at `layer`: x [n_embd] multiplied by
    // its gate/up, h [ff] its SwiGLU row, weighted by the routing weight w before squaring.
    // Throws ds4::Error when a layer's shapes change between calls or the expert is out of range.
    void add_routed(uint32_t layer, int64_t n_expert, int32_t expert, const float* x, int64_t n_embd,
                    const float* h, int64_t ff, float w);
    // One token's shared expert at `layer`: x [n_embd] and its SwiGLU row h [ff].
    void add_shared(uint32_t layer, const float* x, int64_t n_embd, const float* h, int64_t ff);
    // One token seen at `layer` (the count the log reports).
    void count_token() { ++tokens_; }

    // Observations of (layer, expert): 0 for an expert never routed or a layer never seen.
    int64_t count(uint32_t layer, int32_t expert) const;
    // The running sums of squares (nullptr before the first observation of the layer).
    const float* gate_up_sums(uint32_t layer, int32_t expert) const;
    const float* down_sums(uint32_t layer, int32_t expert) const;
    int64_t routes() const { return routes_; }
    int64_t tokens() const { return tokens_; }

    // The means, named as the GGUF tensors they weigh; `dataset` and `chunks` go in the
    // .dat's trailer. Layers never observed have no entries.
    Imatrix imatrix(const std::string& dataset, int chunks) const;

private:
    struct Layer {
        int64_t n_expert = 0, n_embd = 0, ff = 0, ff_shared = 0;
        std::vector<float> gate_up, down;  // [E][n_embd], [E][ff]
        std::vector<int64_t> count;        // [E]
        std::vector<float> shared_in, shared_down;
        int64_t shared_count = 0;
    };
    Layer& layer(uint32_t il);
    const Layer* find(uint32_t il) const { return il < layers_.size() && layers_[il].n_embd ? &layers_[il] : nullptr; }

    int64_t min_samples_;
    std::vector<Layer> layers_;
    int64_t routes_ = 0, tokens_ = 0;
};

}  // namespace ds4::quantize
