// Hands a MoE sublayer's expert inputs to the observers of the call's sequences
// (model/expert_observer.h), family-neutral: the families call observe_experts() once per trunk
// MoE layer, after run_routed_experts().
#pragma once

#include <cstdint>
#include <span>

#include "model/blocks/routed_ffn.h"
#include "model/blocks/router.h"
#include "model/blocks/rows.h"

namespace ds4::blocks {

// For each batch item whose sequence has an observer: its rows of v ([rows.n][D], the FFN
// input), of the routes and of the experts' SwiGLU rows in `out`. Nothing when no sequence
// observes.
void observe_experts(const Rows& rows, uint32_t layer, int64_t n_expert, const float* v,
                     std::span<const Route> routes, const ExpertOutputs& out);

}  // namespace ds4::blocks
