// The registry of weight formats: one FormatOps record (quant.h) per format, each defined
// with the format's kernels (q8_0/q8_0.cpp, ...) and listed once in quant.cpp's kFormats, through
// which format_ops(), dot_kernel(), multi_dot_kernel() and the ggml compatibility mode find
// everything about a format.
#pragma once

#include "quant/quant.h"

namespace ds4::quant {

extern const FormatOps kF32Format;
extern const FormatOps kF16Format;
extern const FormatOps kBf16Format;
extern const FormatOps kQ8_0Format;
extern const FormatOps kQ4_0Format;
extern const FormatOps kQ2_KFormat;
extern const FormatOps kQ4_KFormat;
extern const FormatOps kQ5_KFormat;
extern const FormatOps kQ6_KFormat;
extern const FormatOps kIq2XxsFormat;
extern const FormatOps kMxfp4Format;

}  // namespace ds4::quant
