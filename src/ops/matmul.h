// Matrix products over quantized weights, threaded. As ggml's CPU backend does, activations
// are first converted to the weight format's dot type (Q8_0, Q8_K, F16, ...), so results are
// comparable with the oracle.
//
// Every output value is exactly quant::dot_kernel(W.type)(row, activation), whatever the
// number of tokens, the batching or the thread count: a product over a chunk of tokens equals
// the same tokens one at a time (prefill == decode). Batches use the multi-row kernels
// (quant::multi_dot_kernel), which load and unpack each weight block once for several tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/huge_pages.h"
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

// Several activation rows converted once for a weight format: rows [n_rows][n] of X, split
// over `pool` when given (a prefill chunk's rows would otherwise convert on one thread while
// the others wait).
class Activations {
public:
    void set(const float* X, int64_t n_rows, int64_t n, TensorType dot_type, ThreadPool* pool = nullptr);
    const void* row(int64_t t) const { return buf_.data() + size_t(t) * row_bytes_; }
    TensorType type() const { return type_; }
    int64_t size() const { return n_; }  // values per row
    int64_t rows() const { return rows_; }

private:
    HugeVector<uint8_t> buf_;
    TensorType type_ = TensorType::F32;
    int64_t n_ = 0, rows_ = 0;
    size_t row_bytes_ = 0;
};

// One matrix against a set of activation rows: y[t][r] = W[r] . act[t] for t < n_tokens and
// every row r. act[t] is in dot_type(W.type) with W.cols values; y[t] has W.rows floats.
struct MatmulJob {
    Matrix W;
    const void* const* act = nullptr;
    float* const* y = nullptr;
    int64_t n_tokens = 0;
};

// Runs independent jobs in one parallel region (one wake-up of the pool for all of them):
// the threads take chunks of rows (and of tokens, for long batches) from a shared counter
// (decode: each thread from its own contiguous run first, then from the others'), so each
// weight row is streamed once per block of tokens and nobody idles at a barrier while work
// is left. The pointed-to buffers must not overlap outputs of other jobs.
void matmul_jobs(const MatmulJob* jobs, size_t n_jobs, ThreadPool& pool);

// Where decode time goes, for benchmarks (bench/forward_bench --profile, ds4-bench --profile):
// while a profile is open, every product whose jobs are all at most kProfiledRows activation
// rows long (a decode step, a few sequences decoding together, a verification step) adds its
// wall time, and each of its row chunks adds the time the thread spent on it, the weight bytes
// it read and its multiply-adds, per weight format and activation rows per call. Closed (the
// default), it costs one relaxed load per call. Process-wide; not for use while another thread
// runs products of a different model.
inline constexpr int64_t kProfiledRows = 8;
struct MatvecProfile {
    struct Entry {
        TensorType type{};
        int64_t rows = 0;  // activation rows per call (1 .. kProfiledRows)
        int64_t chunks = 0;
        double thread_seconds = 0, bytes = 0, macs = 0;
    };
    std::vector<Entry> entries;  // those seen, by type id, then rows
    int64_t regions = 0;         // matmul_jobs calls
    double region_seconds = 0;   // their wall time
};
void matvec_profile_open();            // clears the totals and starts counting
MatvecProfile matvec_profile_close();  // stops and returns the totals
// The profile as a markdown table, per step of `steps` (decode tokens, or batched / verified
// steps) that took `wall_seconds` in all on `threads` threads: per format and rows per call,
// MB of weights read, thread ms, GB/s of weights per thread, GMAC/s per thread and the share of
// product time; then the parallel regions and the time outside them. Each line starts with
// `indent`.
std::string matvec_profile_table(const MatvecProfile& p, double steps, double wall_seconds, int threads,
                                 const std::string& indent = "");

// Y[t] = W . X[t] for t in [0, n_tokens); X is [n_tokens][W.cols], Y is [n_tokens][W.rows].
void matmul(const Matrix& W, const float* X, int64_t n_tokens, float* Y, ThreadPool& pool);

// One input, several matrices: Y_i = W_i . X for every product i, all in one parallel region
// (X converted once per dot type among the W_i). Every W_i has `cols` columns; Y_i is
// [n_tokens][W_i.rows]. Equal, value for value, to matmul per matrix; in decode one region
// instead of several saves the pool's hand-offs and the idle tail of each.
struct Product {
    const Matrix* W;
    float* Y;
};
void matmul_shared_input(const float* X, int64_t n_tokens, int64_t cols, std::span<const Product> products,
                         ThreadPool& pool);

// A grouped projection (the attention output, spec/ARCHITECTURE.md §3.3.8): W's rows form `groups`
// blocks of R = W.rows / groups, and block g sees only slice g of each token's input:
//   Y[t][g*R + r] = W[g*R + r] . X[t][g*W.cols .. (g+1)*W.cols)
// X is [n_tokens][groups * W.cols], Y is [n_tokens][W.rows]. Equal, value for value, to a
// product of each group's rows with each token's slice; all groups run in one parallel region.
void matmul_grouped(const Matrix& W, int64_t groups, const float* X, int64_t n_tokens, float* Y,
                    ThreadPool& pool);

}  // namespace ds4::ops
