// The multi-row dot kernels behind quant.h multi_dot_kernel(): one per format and ISA, in the
// format's folder (<format>/<format>_multi_<isa>.cpp), declared in its header and listed in its
// FormatOps record. Each repeats, per activation row, the float operations of the format's dot
// kernel on the same ISA in the same order, on the same integer lane values (which some
// compute differently, e.g. from activations packed as unsigned bytes), while the weight side
// (loads, unpacking, codebook lookups, scales) is done once for a tile of activation rows.
// Signature and contract: quant.h MultiDotFn; tests/unit/quant_multi_dot_test.cpp holds every
// kernel bit-identical to the dot kernel.
#pragma once

#include <cstddef>
#include <cstdint>

#include "quant/quant.h"

namespace ds4::quant {

// The scalar level of every format's multi-row kernel: the scalar reference dot applied row by
// row and activation by activation.
template <DotFn dot>
void multi_scalar(int64_t n, const void* W, size_t w_stride, int64_t rows, const void* const* act,
                  int64_t n_act, float* const* y) {
    const auto* base = static_cast<const uint8_t*>(W);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < n_act; ++t) y[t][r] = dot(n, base + size_t(r) * w_stride, act[t]);
}

}  // namespace ds4::quant
