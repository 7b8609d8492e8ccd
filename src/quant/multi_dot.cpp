// quant.h multi_dot_kernel(): the table of multi-row kernels (multi_dot.h), and the scalar
// level, which is the scalar reference dot applied row by row and activation by activation.
#include "quant/multi_dot.h"

#include "quant/float_formats.h"
#include "quant/iq2_xxs.h"
#include "quant/mxfp4.h"
#include "quant/q2_k.h"
#include "quant/q4_k.h"
#include "quant/q8_0.h"
#include "quant/quant.h"

namespace ds4::quant {
namespace {

template <DotFn dot>
void multi_scalar(int64_t n, const void* W, size_t w_stride, int64_t rows,
                  const void* const* act, int64_t n_act, float* const* y) {
    const auto* base = static_cast<const uint8_t*>(W);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = 0; t < n_act; ++t) y[t][r] = dot(n, base + size_t(r) * w_stride, act[t]);
}

struct MultiOps {
    TensorType type;
    MultiDotFn multi[kIsaCount];
};

constexpr MultiOps kMulti[] = {
    {TensorType::Q8_0, {multi_scalar<dot_q8_0_scalar>, multi_q8_0_avx2, multi_q8_0_avx512}},
    {TensorType::MXFP4, {multi_scalar<dot_mxfp4_scalar>, multi_mxfp4_avx2, multi_mxfp4_avx512}},
    {TensorType::Q2_K, {multi_scalar<dot_q2_k_q8_k_scalar>, multi_q2_k_avx2, multi_q2_k_avx512}},
    {TensorType::Q4_K, {multi_scalar<dot_q4_k_q8_k_scalar>, multi_q4_k_avx2, multi_q4_k_avx512}},
    {TensorType::IQ2_XXS,
     {multi_scalar<dot_iq2_xxs_q8_k_scalar>, multi_iq2_xxs_avx2, multi_iq2_xxs_avx512}},
    {TensorType::F16, {multi_scalar<dot_f16_scalar>, multi_f16_avx2, multi_f16_avx512}},
};

}  // namespace

MultiDotFn multi_dot_kernel(TensorType w, Isa isa) {
    if (ggml_compat()) return nullptr;  // compat dots have their own order; callers loop
    const FormatOps* ops = format_ops(w);
    if (!ops) return nullptr;
    // The ISA level dot_kernel(w, isa) resolves to: the multi kernel must match that one.
    int level = int(isa);
    while (level > 0 && !(ops->dot[level] && isa_supported(Isa(level)))) --level;
    for (const MultiOps& m : kMulti)
        if (m.type == w) return m.multi[level];
    return nullptr;
}

}  // namespace ds4::quant
