// The routed-expert FFN executor (family-neutral): given each row's route (blocks/router.h),
// runs the chosen experts' SwiGLU networks, whose matrices come from a model::ExpertSource, and
// the shared expert if the layer has one; then combine_experts() sums each row's expert outputs
// by its routing weights.
//
// The rows are grouped by expert: each used expert's gate/up/down run once as a matrix product
// over the rows that chose it, all experts (and the shared one) in one parallel region per
// projection. The experts are announced to the source before their products, in groups of at
// most its capacity (one group unless a streaming cache is smaller than the call's distinct
// experts); the shared expert runs with the first group. Every (row, slot) result is what a
// row-by-row pass computes (ops/matmul.h), and each row sums its outputs in its own selection
// order, then the shared expert: the same float operations in the same order, whatever the
// batch, the grouping or the thread count (prefill equals decode bit for bit).
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/thread_pool.h"
#include "gguf/tensor_type.h"
#include "model/blocks/router.h"
#include "model/blocks/rows.h"
#include "model/blocks/swiglu_ffn.h"
#include "model/blocks/workspace.h"
#include "model/expert_source.h"

namespace ds4::blocks {

struct RoutedFfnSpec {
    uint32_t layer = 0;                        // the layer id the ExpertSource knows
    int64_t n_expert = 0, n_used = 0;          // E, K
    int64_t n_embd = 0, ff = 0;                // D; F: rows of one routed expert's gate/up
    TensorType gate_type = TensorType::F32;    // storage types of the routed experts' tensors
    TensorType up_type = TensorType::F32;      // (their dot types: the activations' formats)
    TensorType down_type = TensorType::F32;
    float clamp = 0.0f;                        // routed experts' SwiGLU clamp (<= 0: none)
    const SwigluWeights* shared = nullptr;     // the shared expert (with its own clamp), or none
};

// What run_routed_experts leaves in the arena.
struct ExpertOutputs {
    const float* routed = nullptr;  // [n*K][D]: slot t*K+k is row t's k-th chosen expert (unweighted)
    const float* shared = nullptr;  // [n][D], or null without a shared expert
    int64_t n = 0, n_used = 0, width = 0;
    // The down projections' inputs before their activation format (model/expert_observer.h):
    const float* hidden = nullptr;         // [n*K][ff] slot t*K+k's SwiGLU row
    const float* shared_hidden = nullptr;  // [n][ff_shared], or null
    int64_t ff = 0, ff_shared = 0;
};

// Runs the experts routes[t].chosen of each of the n rows of v ([n][D], the FFN input) and the
// shared expert. Throws ds4::Error for an expert id outside [0, E) before anything runs.
// `hint`, when set, is called once right after the first group is prepared, and only when the
// call's experts fit in one group and the source wants_hints() (a streaming source's lookahead:
// a forecast's reads would otherwise take the slots the next group needs).
ExpertOutputs run_routed_experts(const RoutedFfnSpec& spec, const float* v, int64_t n, std::span<const Route> routes,
                                 model::ExpertSource& source, ThreadPool& pool, ScratchArena& scratch,
                                 FfnBuffers& buf, const std::function<void()>& hint = {});

// Per row t, in its selection order: F = sum_k w_k y_k, plus the shared expert's output; then
// finish(t, F) with F [D] (valid during the call). Rows split over the pool in runs of 4.
template <class Fn>
void combine_experts(const ExpertOutputs& o, std::span<const Route> routes, ThreadPool& pool, Fn&& finish) {
    const int64_t D = o.width, K = o.n_used;
    pool.parallel_for(o.n, [&](int64_t b, int64_t e) {
        std::vector<float> Fv(static_cast<size_t>(D));
        for (int64_t t = b; t < e; ++t) {
            std::fill(Fv.begin(), Fv.end(), 0.0f);
            for (int64_t k = 0; k < K; ++k) {
                const float wk = routes[size_t(t)].weight[size_t(k)];
                const float* yt = &o.routed[size_t((t * K + k) * D)];
                for (int64_t i = 0; i < D; ++i) Fv[size_t(i)] += wk * yt[i];
            }
            if (o.shared) {
                const float* st = &o.shared[size_t(t * D)];
                for (int64_t i = 0; i < D; ++i) Fv[size_t(i)] += st[i];
            }
            finish(t, Fv.data());
        }
    }, 4);
}

// Each row's chosen experts and selection margin into its sequence's decision log (the
// sequences that keep one), at its position and `layer` (of `n_layer` trunk layers).
void log_routes(const Rows& rows, uint32_t layer, uint32_t n_layer, std::span<const Route> routes);

}  // namespace ds4::blocks
