#include "ops/matmul.h"

#include "common/error.h"

namespace ds4::ops {

void Activation::set(const float* x, int64_t n, TensorType dot_type) {
    buf_.resize(row_bytes(dot_type, n));
    quant::quantize_activation(dot_type, x, buf_.data(), n);
    type_ = dot_type;
    n_ = n;
}

void matvec(const Matrix& W, const Activation& x, float* y, ThreadPool& pool) {
    if (x.size() != W.cols) fail("matvec: activation has {} values, matrix has {} columns", x.size(), W.cols);
    if (x.type() != quant::dot_type(W.type))
        fail("matvec: activation is {}, {} weights take {}", tensor_type_name(x.type()),
             tensor_type_name(W.type), tensor_type_name(quant::dot_type(W.type)));
    const quant::DotFn dot = quant::dot_kernel(W.type);
    const void* a = x.data();
    const int64_t n = W.cols;
    pool.parallel_for(W.rows, [&](int64_t b, int64_t e) {
        for (int64_t r = b; r < e; ++r) y[r] = dot(n, W.row(r), a);
    }, 16);
}

void matvec(const Matrix& W, const float* x, float* y, ThreadPool& pool) {
    thread_local Activation act;
    act.set(x, W.cols, quant::dot_type(W.type));
    matvec(W, act, y, pool);
}

}  // namespace ds4::ops

namespace ds4::ops {
void matmul(const Matrix& W, const float* X, int64_t n_tokens, float* Y, ThreadPool& pool) {
    for (int64_t t = 0; t < n_tokens; ++t) matvec(W, X + t * W.cols, Y + t * W.rows, pool);
}
}  // namespace ds4::ops
