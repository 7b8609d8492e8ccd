// The KV compressor of ratio-4 and ratio-128 layers (spec/ARCHITECTURE.md §3.3.4, §4.1): pools
// every `ratio` tokens of projected KV into one compressed row, with a per-channel softmax over
// the tokens' gate scores. Ratio 4 pools overlapping windows: each token's projection has two
// halves, the first serving the NEXT window, the second its own.
//
// One instance per (layer, kind): the attention compressor (width head_dim) and, on ratio-4
// layers, the indexer's (width indexer_dim).
#pragma once

#include <cstdint>
#include <vector>

#include "model/deepseek4/weights.h"
#include "ops/rope.h"

namespace ds4::deepseek4 {

// What the emitted row goes through after pooling and RMSNorm: RoPE of its tail at the
// window's first position, then the QAT round trip of its kind.
enum class CompressedRowQat { None, Fp8Nope, HadamardFp4 };

class CompressorState {
public:
    // `slack` extra token slots let rewind() go back up to `slack` positions without
    // recomputation (the tokens a window needs are still in the ring).
    void init(const CompressorWeights& w, int64_t slack = 0);
    void reset();
    // Feeds token p's projections k, g ([coff*width], APE already added to g); p must be one
    // past the last fed position. Returns true when p completes a window, with the pooled (not
    // yet normalised) row in pooled[width].
    bool push(int64_t p, const float* k, const float* g, float* pooled);
    // Whether the state after feeding positions 0..n-1 can be restored without refeeding:
    // every token the windows open at n need is still in the ring.
    bool can_rewind(int64_t n) const;
    // Restores that state (requires can_rewind(n)).
    void rewind(int64_t n);
    int64_t bytes() const { return int64_t(sizeof(float) * (kv_.size() + score_.size())); }
    // What init() allocates for these weights and slack, without allocating.
    static int64_t bytes_for(int ratio, int width, int64_t slack);

    // The state as data (state files, model/state_file.h): after feeding positions
    // 0..next()-1, the open windows use positions [open_first(), next()), each a row of
    // row_width() projections and as many gate scores.
    int64_t next() const { return next_; }
    int64_t open_first() const { return first_needed(next_); }
    int64_t open_first_at(int64_t next) const { return first_needed(next); }
    int64_t row_width() const { return row_; }
    const float* kv_row(int64_t p) const { return kv(p); }
    const float* score_row(int64_t p) const { return score(p); }
    // Restores the state after feeding positions 0..next-1 from the open windows' rows
    // (kv and score: [next - open_first][row_width()] each, in position order).
    void load(int64_t next, const float* kv, const float* score);
    // The open windows' projections (kv and score) that pooling still needs.
    int64_t used_bytes() const {
        return next_ == 0 ? 0 : int64_t(sizeof(float)) * 2 * row_ * (next_ - first_needed(next_));
    }

private:
    int64_t first_needed(int64_t n) const;  // first position the open windows at n use
    const float* kv(int64_t p) const { return &kv_[size_t(p % slots_) * row_]; }
    const float* score(int64_t p) const { return &score_[size_t(p % slots_) * row_]; }

    int ratio_ = 0, width_ = 0, coff_ = 1;
    int64_t row_ = 0, slots_ = 0;
    int64_t next_ = 0;  // the next position to feed; the ring holds [next_ - slots_, next_)
    int64_t valid_from_ = 0;  // ...from this position on (after load(): the open windows only)
    // Per token projections, position p at slot p mod slots_: the current window (ratio 4:
    // and the previous one, whose first halves it overlaps) plus `slack` older tokens.
    std::vector<float> kv_, score_;  // [slots][coff*width]
};

// Normalises, ropes (at position `first_pos` of the window) and applies the QAT of a pooled
// compressed row in place.
void finish_compressed_row(float* row, const CompressorWeights& w, const ops::Rope& rope,
                           int64_t first_pos, float eps, int rope_dim, CompressedRowQat qat);

}  // namespace ds4::deepseek4
