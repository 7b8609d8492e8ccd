// The quantizer ds4-quantize writes files with: llama.cpp's own (ggml_quantize_chunk in
// ggml-quants.c) reproduced byte for byte, with and without an importance matrix, so a file
// made here is the file llama-quantize makes from the same floats and imatrix.
//
// This is not the engine's reference quantizer (quant::quantize_row): for Q2_K, Q4_K and
// IQ2_XXS that one minimises the weighted error by its own search (quant/kquant_fit.h) and
// the generator's test models are made with it, so it stays as it is.
//
// Exact for Q8_0, Q4_0, Q2_K, Q4_K, Q5_K, Q6_K and IQ2_XXS; F32, F16 and BF16 are
// conversions (exact by definition). ggml's IQ2_XXS needs importance weights: without them
// (ggml would abort) this falls back to the engine's quantizer (unit weights). MXFP4 is the
// engine's. ggml_exact() says which. Q8_0, Q4_0, Q6_K and Q5_K without importance are the
// engine's quantizers (quant/), which write ggml's bytes; the rest is ggml's fit written here. tests/oracle/quantize_ggml_oracle_test.cpp holds the
// bytes equal.
#pragma once

#include <cstdint>

#include "gguf/tensor_type.h"

namespace ds4::quantize {

// Whether quantize_rows() writes ggml's bytes for type t (IQ2_XXS: given importance).
bool ggml_exact(TensorType t);

// nrows rows of n_per_row values (a multiple of t's block size) into t's blocks, as
// ggml_quantize_chunk(t, src, dst, 0, nrows, n_per_row, importance). importance: n_per_row
// weights shared by every row (llama.cpp's imatrix of the tensor), or nullptr. ggml ignores it
// for Q8_0; for the K-quants and Q4_0 it switches to ggml's imatrix quantizer. Throws
// ds4::Error for a type that is not an engine weight format.
void quantize_rows(TensorType t, const float* src, void* dst, int64_t nrows, int64_t n_per_row,
                   const float* importance);

}  // namespace ds4::quantize
