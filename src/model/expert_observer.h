// The routed-FFN observer: a read-only look at what a MoE sublayer's experts multiply, for
// the imatrix collection (`ds4 --imatrix-dataset`, docs/QUANTIZE.md). A sequence may carry one
// (Sequence::set_expert_observer, default none); every trunk MoE layer then calls it once per
// forward call with that sequence's rows, after the expert products and before the rows join
// the residual. Observing changes no result; without an observer the pass does nothing more
// than check the pointer.
//
// It sits beside the steering capture (model/steering.h: the sublayer's output of a sequence's
// last row) because the imatrix needs what that capture does not see: every row's FFN input
// and each chosen expert's SwiGLU row, the inputs of gate/up and of down.
#pragma once

#include <cstdint>

namespace ds4::model {

// One layer's rows of one sequence in one call, in position order. The pointers are valid
// during observe() only.
struct ExpertRows {
    uint32_t layer = 0;                    // trunk layer id
    int64_t n = 0;                         // rows
    int64_t n_embd = 0, ff = 0;            // D; F: one routed expert's SwiGLU width
    int64_t n_used = 0, n_expert = 0;      // K chosen of E experts
    int64_t ff_shared = 0;                 // the shared expert's width (0: none)
    const float* input = nullptr;          // [n][D] the normalised FFN input (gate/up, routed and shared)
    const int32_t* chosen = nullptr;       // [n][K] expert ids, in selection order
    const float* weight = nullptr;         // [n][K] their routing weights
    const float* hidden = nullptr;         // [n][K][F] each chosen expert's SwiGLU row (unweighted)
    const float* shared_hidden = nullptr;  // [n][ff_shared] the shared expert's, or null
};

class ExpertObserver {
public:
    virtual ~ExpertObserver() = default;
    // Called on the forward pass's calling thread, never concurrently for one sequence.
    virtual void observe(const ExpertRows& rows) = 0;
};

}  // namespace ds4::model
