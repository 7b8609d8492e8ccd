// Rotary position embedding on the tail of a vector (spec/ARCHITECTURE.md §3.0): interleaved pairs
// (ggml "NORM" mode) over the last rope_dim values; optional YaRN frequency blend without any
// magnitude (mscale) correction.
#pragma once

#include <cstdint>
#include <vector>

namespace ds4::ops {

struct RopeParams {
    int rope_dim = 64;          // rotated dims, at the tail of each head
    float freq_base = 10000.0f;
    bool yarn = false;          // compressed layers: YaRN blend of the frequencies
    float yarn_factor = 16.0f;
    float yarn_orig_ctx = 65536.0f;
    float yarn_beta_fast = 32.0f;
    float yarn_beta_slow = 1.0f;
};

// Per-pair angular frequencies f'_i, i in [0, rope_dim/2).
class Rope {
public:
    explicit Rope(const RopeParams& p);
    const std::vector<float>& freqs() const { return freq_; }
    int rope_dim() const { return dim_; }
    // Rotates the last rope_dim values of each of n_heads heads of width head_dim by +p
    // (inverse = false) or -p (inverse = true).
    void apply(float* x, int n_heads, int head_dim, int64_t pos, bool inverse = false) const;
    // The same on the FIRST rope_dim values of each head (GLM's indexer rows: [rope | rest]).
    void apply_leading(float* x, int n_heads, int head_dim, int64_t pos) const;

private:
    void rotate(float* x, int n_heads, int head_dim, int start, int64_t pos, bool inverse) const;
    int dim_;
    std::vector<float> freq_;
};

}  // namespace ds4::ops
