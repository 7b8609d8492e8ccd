// The KV compressor of ratio-4 and ratio-128 layers (ARCHITECTURE.md §3.3.4, §4.1): pools
// every `ratio` tokens of projected KV into one compressed row, with a per-channel softmax over
// the tokens' gate scores. Ratio 4 pools overlapping windows: each token's projection has two
// halves, the first serving the NEXT window, the second its own.
//
// One instance per (layer, kind): the attention compressor (width head_dim) and, on ratio-4
// layers, the indexer's (width indexer_dim).
#pragma once

#include <cstdint>
#include <vector>

#include "model/weights.h"
#include "ops/rope.h"

namespace ds4::model {

// What the emitted row goes through after pooling and RMSNorm: RoPE of its tail at the
// window's first position, then the QAT round trip of its kind.
enum class CompressedRowQat { None, Fp8Nope, HadamardFp4 };

class CompressorState {
public:
    void init(const CompressorWeights& w);
    void reset();
    // Feeds token p's projections k, g ([coff*width], APE already added to g). Returns true
    // when p completes a window, with the pooled (not yet normalised) row in pooled[width].
    bool push(int64_t p, const float* k, const float* g, float* pooled);

private:
    int ratio_ = 0, width_ = 0, coff_ = 1;
    // Ratio 4: slots 0..3 = previous window, 4..7 = current window; ratio r: slot p mod r.
    std::vector<float> kv_, score_;  // [slots][coff*width]
};

// Normalises, ropes (at position `first_pos` of the window) and applies the QAT of a pooled
// compressed row in place.
void finish_compressed_row(float* row, const CompressorWeights& w, const ops::Rope& rope,
                           int64_t first_pos, float eps, int rope_dim, CompressedRowQat qat);

}  // namespace ds4::model
