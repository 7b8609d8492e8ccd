// Matrix-vector products over quantized weights, threaded. As ggml's CPU backend does, the
// activation is first converted to the weight format's dot type (Q8_0, Q8_K, F16, ...), so
// results are comparable with the oracle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/thread_pool.h"
#include "gguf/tensor_type.h"
#include "quant/quant.h"

namespace ds4::ops {

// A row-major [rows][cols] weight matrix in one of the quant formats (a GGUF ne=[cols, rows]
// tensor, or one expert's slab of a 3-D tensor).
struct Matrix {
    TensorType type = TensorType::F32;
    int64_t rows = 0, cols = 0;
    const uint8_t* data = nullptr;
    size_t row_bytes = 0;

    const uint8_t* row(int64_t r) const { return data + size_t(r) * row_bytes; }
    // Rows [first, first + count) as a matrix of their own.
    Matrix slice_rows(int64_t first, int64_t count) const {
        return Matrix{type, count, cols, row(first), row_bytes};
    }
};

// An activation converted once for a weight format, reusable across matrices of that format.
class Activation {
public:
    void set(const float* x, int64_t n, TensorType dot_type);
    const void* data() const { return buf_.data(); }
    TensorType type() const { return type_; }
    int64_t size() const { return n_; }

private:
    std::vector<uint8_t> buf_;
    TensorType type_ = TensorType::F32;
    int64_t n_ = 0;
};

// y[r] = W[r] . x for every row; threads split the rows.
void matvec(const Matrix& W, const float* x, float* y, ThreadPool& pool);
// Same with the activation already converted (its type must be dot_type(W.type)).
void matvec(const Matrix& W, const Activation& x, float* y, ThreadPool& pool);

}  // namespace ds4::ops

namespace ds4::ops {
// Y[t] = W . X[t] for t in [0, n_tokens); X is [n_tokens][W.cols], Y is [n_tokens][W.rows].
void matmul(const Matrix& W, const float* X, int64_t n_tokens, float* Y, ThreadPool& pool);
}  // namespace ds4::ops
