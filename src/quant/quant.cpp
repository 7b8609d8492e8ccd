#include "quant/quant.h"

#include <cstring>

#include "common/error.h"
#include "common/half.h"
#include "quant/float/float_formats.h"
#include "quant/activation/activation.h"
#include "quant/formats.h"
#include "quant/ggml_compat/ggml_compat.h"

namespace ds4::quant {

namespace {

// Every weight format, once (formats.h).
constexpr const FormatOps* kFormats[] = {&kF32Format,  &kF16Format,    &kBf16Format,
                                         &kQ8_0Format, &kQ4_0Format,   &kQ2_KFormat,
                                         &kQ4_KFormat, &kQ5_KFormat,   &kQ6_KFormat,
                                         &kIq2XxsFormat, &kMxfp4Format};

}  // namespace

const FormatOps* format_ops(TensorType t) {
    for (const FormatOps* ops : kFormats)
        if (ops->type == t) return ops;
    return nullptr;
}

bool is_weight_format(TensorType t) { return format_ops(t) != nullptr; }

std::string weight_format_names() {
    std::string out;
    for (const FormatOps* ops : kFormats) {
        if (!out.empty()) out += ", ";
        out += tensor_type_info(ops->type)->name;
    }
    return out;
}

bool multi_dot_for_one_activation(TensorType w) {
    const FormatOps* ops = format_ops(w);
    return ops && ops->multi_for_one_activation;
}

bool multi_dot_blocks_rows(TensorType w) {
    const FormatOps* ops = format_ops(w);
    return ops && ops->multi_blocks_rows;
}

static const FormatOps& ops_or_fail(TensorType t) {
    const FormatOps* ops = format_ops(t);
    if (!ops) fail("tensor type {} has no kernels in this engine", tensor_type_name(t));
    return *ops;
}

static void check_blocks(TensorType t, int64_t n) { (void)row_bytes(t, n); }

TensorType dot_type(TensorType weight) { return ops_or_fail(weight).dot_type; }

void dequantize_row(TensorType t, const void* src, float* dst, int64_t n) {
    if (t == TensorType::Q8_K) {
        check_blocks(t, n);
        return dequantize_q8_k(static_cast<const BlockQ8_K*>(src), dst, n);
    }
    const FormatOps& ops = ops_or_fail(t);
    check_blocks(t, n);
    ops.dequantize(src, dst, n);
}

void quantize_row(TensorType t, const float* src, void* dst, int64_t n, const float* importance) {
    const FormatOps& ops = ops_or_fail(t);
    check_blocks(t, n);
    ops.quantize(src, dst, n, importance);
}

void quantize_activation(TensorType act_type, const float* src, void* dst, int64_t n) {
    check_blocks(act_type, n);
    switch (act_type) {
        case TensorType::F32: std::memcpy(dst, src, size_t(n) * sizeof(float)); return;
        case TensorType::F16: {
            auto* d = static_cast<uint16_t*>(dst);
            if (best_isa() >= Isa::Avx2) return avx2::f32_to_f16_row(src, d, n);  // F16C
            for (int64_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
            return;
        }
        case TensorType::BF16: {
            auto* d = static_cast<uint16_t*>(dst);
            for (int64_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
            return;
        }
        case TensorType::Q8_0:
            if (best_isa() >= Isa::Avx512Vnni) return avx512::quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
            return quantize_q8_0(src, static_cast<BlockQ8_0*>(dst), n);
        case TensorType::Q8_K:
            if (best_isa() >= Isa::Avx512Vnni) return avx512::quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), n);
            return quantize_q8_k(src, static_cast<BlockQ8_K*>(dst), n);
        default: fail("{} is not an activation format", tensor_type_name(act_type));
    }
}

DotFn dot_kernel(TensorType w, Isa isa) {
    const FormatOps& ops = ops_or_fail(w);
    if (ggml_compat())
        if (DotFn f = compat::dot_kernel(w)) return f;
    for (int i = int(isa); i >= 0; --i)
        if (ops.dot[i] && isa_supported(Isa(i))) return ops.dot[i];
    fail("no dot kernel for {}", tensor_type_name(w));
}

MultiDotFn multi_dot_kernel(TensorType w, Isa isa) {
    if (ggml_compat()) return nullptr;  // compat dots have their own order; callers loop
    const FormatOps* ops = format_ops(w);
    if (!ops) return nullptr;
    // The ISA level dot_kernel(w, isa) resolves to: the multi kernel must match that one.
    int level = int(isa);
    while (level > 0 && !(ops->dot[level] && isa_supported(Isa(level)))) --level;
    return ops->multi[level];
}

}  // namespace ds4::quant
