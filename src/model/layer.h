// One block of the model (internal to src/model): the per-layer KV state and the two
// sublayers. X is the HC state of a chunk of n tokens at positions p0..p0+n-1, [n][hc][n_embd],
// updated in place.
#pragma once

#include <cstdint>
#include <vector>

#include "common/huge_pages.h"
#include "model/compressor.h"
#include "ops/hc.h"
#include "model/model.h"

namespace ds4::model {

// Per-layer KV state (§4.1).
struct Session::LayerState {
    // `slack`: how many positions rewind() can go back without recomputation.
    LayerState(const ModelConfig& c, const LayerWeights& w, int64_t ctx, int64_t slack);
    void reset();
    // Whether the state after positions 0..n-1 is still recoverable from this one (n <= the
    // positions fed so far), and the rewind itself: the raw ring and the compressor rings
    // still hold what position n needs, and compressed rows past n are dropped.
    bool can_rewind(int64_t n, int64_t pos) const;
    void rewind(int64_t n);
    int64_t bytes() const;
    int64_t used_bytes(int64_t pos) const;  // with positions 0..pos-1 fed

    int ratio = 0;
    int64_t window = 0, head_dim = 0, indexer_dim = 0;
    int64_t raw_slots = 0;              // window + slack
    const float* raw_row(int64_t p) const { return &raw[size_t((p % raw_slots) * head_dim)]; }
    float* raw_row(int64_t p) { return &raw[size_t((p % raw_slots) * head_dim)]; }
    std::vector<float> raw;             // [raw_slots][head_dim], position p at slot p mod raw_slots
    std::vector<float> comp;            // [rows][head_dim] attention compressed cache
    int64_t n_comp = 0;
    std::vector<float> index_comp;      // [rows][indexer_dim] indexer compressed cache (ratio 4)
    int64_t n_index_comp = 0;
    CompressorState compressor, index_compressor;
};

struct LayerContext {
    const ModelConfig& cfg;
    const Model& model;
    ThreadPool& pool;
    const SessionOptions& opt;
    DecisionLog* log;
};

void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, Session::LayerState& s,
                        float* X, int64_t n, int64_t p0);
void moe_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X,
                  const int32_t* tokens, int64_t n, int64_t p0);

// v.data() with at least n floats: scratch buffers only grow (fresh large allocations cost
// page faults and clearing on every chunk) and sit on huge pages (common/huge_pages.h).
inline float* grow(HugeVector<float>& v, int64_t n) {
    if (v.size() < size_t(n)) v.resize(size_t(n));
    return v.data();
}

// fn(t) for every token t < n, split over the pool (per-token work that is independent).
template <class Fn>
void for_tokens(ThreadPool& pool, int64_t n, Fn&& fn) {
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) fn(t);
    });
}

// hc_pre for every token of the chunk (§3.2): the sublayer inputs y [n][n_embd] and the mixes
// that hc_post needs.
std::vector<ops::HcMix> hc_pre(const LayerContext& ctx, const ops::Matrix& fn, const float* scale,
                               const float* base, const float* X, int64_t n, float* y);

}  // namespace ds4::model
