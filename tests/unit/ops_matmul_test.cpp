// ops::matmul / matmul_jobs: every output is exactly dot_kernel(row, activation) for
// any token count, thread count or job mix, so a batched prefill equals token-by-token decode.
#include <gtest/gtest.h>

#include <bit>
#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "ops/matmul.h"

namespace ds4::ops {
namespace {

struct OwnedMatrix {
    std::vector<uint8_t> bytes;
    Matrix m;
};

// rows x cols weights of type t quantized from gaussian values.
OwnedMatrix make_matrix(TensorType t, int64_t rows, int64_t cols, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.f, 1.f);
    OwnedMatrix o;
    const size_t rb = row_bytes(t, cols);
    o.bytes.resize(rb * size_t(rows));
    std::vector<float> x(static_cast<size_t>(cols));
    for (int64_t r = 0; r < rows; ++r) {
        for (auto& v : x) v = g(rng);
        quant::quantize_row(t, x.data(), o.bytes.data() + size_t(r) * rb, cols);
    }
    o.m = Matrix{t, rows, cols, o.bytes.data(), rb};
    return o;
}

std::vector<float> gaussian(int64_t n, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(n));
    for (auto& v : x) v = g(rng);
    return x;
}

// The reference: each token alone through dot_kernel.
std::vector<float> reference(const Matrix& W, const float* X, int64_t n_tokens) {
    const TensorType at = quant::dot_type(W.type);
    std::vector<uint8_t> a(row_bytes(at, W.cols));
    std::vector<float> Y(size_t(n_tokens * W.rows));
    const quant::DotFn dot = quant::dot_kernel(W.type);
    for (int64_t t = 0; t < n_tokens; ++t) {
        quant::quantize_activation(at, X + t * W.cols, a.data(), W.cols);
        for (int64_t r = 0; r < W.rows; ++r) Y[size_t(t * W.rows + r)] = dot(W.cols, W.row(r), a.data());
    }
    return Y;
}

void expect_same_bits(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
        ASSERT_EQ(std::bit_cast<uint32_t>(got[i]), std::bit_cast<uint32_t>(want[i]))
            << what << " index " << i << ": " << got[i] << " vs " << want[i];
}

TEST(Matmul, EqualsTokenByTokenDotsForEveryFormatAndThreadCount) {
    // 4096 columns of Q8_0 put ~60 tokens in an activation block: 70 tokens cross blocks.
    const struct {
        TensorType t;
        int64_t rows, cols;
    } shapes[] = {{TensorType::Q8_0, 37, 4096}, {TensorType::Q2_K, 19, 512},
                  {TensorType::Q4_K, 21, 512},  {TensorType::IQ2_XXS, 23, 512},
                  {TensorType::MXFP4, 17, 320}, {TensorType::F16, 29, 200},
                  {TensorType::F32, 11, 96},    {TensorType::BF16, 13, 64}};
    for (const auto& s : shapes) {
        const OwnedMatrix W = make_matrix(s.t, s.rows, s.cols, 11);
        for (int64_t n : {1, 2, 5, 70}) {
            const auto X = gaussian(n * s.cols, uint32_t(n));
            const auto want = reference(W.m, X.data(), n);
            for (int threads : {1, 2, 3}) {
                ThreadPool pool(threads);
                std::vector<float> Y(size_t(n * s.rows));
                matmul(W.m, X.data(), n, Y.data(), pool);
                expect_same_bits(Y, want, tensor_type_name(s.t).c_str());
            }
        }
    }
}

TEST(Matmul, DecodeProfileCountsFewRowProductsPerFormatAndRows) {
    const OwnedMatrix A = make_matrix(TensorType::Q8_0, 300, 1024, 5);
    const OwnedMatrix B = make_matrix(TensorType::F16, 40, 512, 6);
    const auto X = gaussian(9 * 1024, 7);
    ThreadPool pool(2);
    std::vector<float> y(9 * 300);
    matvec_profile_open();
    matmul(A.m, X.data(), 1, y.data(), pool);
    matmul(A.m, X.data(), 1, y.data(), pool);
    matmul(B.m, X.data(), 1, y.data(), pool);
    matmul(A.m, X.data(), 4, y.data(), pool);  // a step of 4 rows: its own entry
    matmul(A.m, X.data(), 9, y.data(), pool);  // past kProfiledRows: prefill, not counted
    const MatvecProfile p = matvec_profile_close();
    matmul(B.m, X.data(), 1, y.data(), pool);  // closed: not counted
    ASSERT_EQ(p.entries.size(), 3u);
    // By type id (F16 1 before Q8_0 8), then rows.
    EXPECT_EQ(p.entries[0].type, TensorType::F16);
    EXPECT_EQ(p.entries[0].rows, 1);
    EXPECT_EQ(p.entries[1].type, TensorType::Q8_0);
    EXPECT_EQ(p.entries[1].rows, 1);
    EXPECT_EQ(p.entries[2].type, TensorType::Q8_0);
    EXPECT_EQ(p.entries[2].rows, 4);
    EXPECT_EQ(p.entries[0].bytes, double(B.m.rows) * double(B.m.row_bytes));
    EXPECT_EQ(p.entries[0].macs, double(B.m.rows) * double(B.m.cols));
    EXPECT_EQ(p.entries[1].bytes, 2.0 * double(A.m.rows) * double(A.m.row_bytes));
    EXPECT_EQ(p.entries[1].macs, 2.0 * double(A.m.rows) * double(A.m.cols));
    EXPECT_EQ(p.entries[2].bytes, double(A.m.rows) * double(A.m.row_bytes));  // weights read once
    EXPECT_EQ(p.entries[2].macs, 4.0 * double(A.m.rows) * double(A.m.cols));
    EXPECT_GE(p.entries[1].chunks, 2);
    EXPECT_GT(p.entries[1].thread_seconds, 0.0);
    EXPECT_EQ(p.regions, 4);
    EXPECT_GT(p.region_seconds, 0.0);
    // The table: one line per entry, per step.
    const std::string t = matvec_profile_table(p, 2.0, 1.0, 2, "  ");
    EXPECT_NE(t.find("  | q8_0 | 4 | "), std::string::npos) << t;
    EXPECT_NE(t.find("  | f16 | 1 | "), std::string::npos) << t;
    EXPECT_NE(t.find("2.0 parallel regions per step"), std::string::npos) << t;
    // Reopening starts from zero.
    matvec_profile_open();
    EXPECT_TRUE(matvec_profile_close().entries.empty());
}

TEST(Matmul, JobsWithGatheredRowsEqualSeparateProducts) {
    // Two experts of a stacked matrix, each with its own scattered tokens, plus an empty job.
    const OwnedMatrix W = make_matrix(TensorType::Q2_K, 2 * 40, 512, 5);
    const int64_t n = 9;
    const auto X = gaussian(n * 512, 6);
    Activations acts;
    acts.set(X.data(), n, 512, TensorType::Q8_K);
    const Matrix e0 = W.m.slice_rows(0, 40), e1 = W.m.slice_rows(40, 40);
    const std::vector<int64_t> tok0 = {0, 3, 4, 8}, tok1 = {1, 2, 4, 5, 6, 7, 8};
    std::vector<float> out(size_t(n * 2 * 40), 0.f);  // [token][expert][row]
    std::vector<const void*> a0, a1;
    std::vector<float*> y0, y1;
    for (int64_t t : tok0) a0.push_back(acts.row(t)), y0.push_back(&out[size_t(t * 80)]);
    for (int64_t t : tok1) a1.push_back(acts.row(t)), y1.push_back(&out[size_t(t * 80 + 40)]);
    const MatmulJob jobs[] = {{e0, a0.data(), y0.data(), int64_t(tok0.size())},
                              {e1, nullptr, nullptr, 0},
                              {e1, a1.data(), y1.data(), int64_t(tok1.size())}};
    ThreadPool pool(2);
    matmul_jobs(jobs, 3, pool);
    const auto r0 = reference(e0, X.data(), n), r1 = reference(e1, X.data(), n);
    for (int64_t t = 0; t < n; ++t)
        for (int64_t r = 0; r < 40; ++r) {
            const bool in0 = std::count(tok0.begin(), tok0.end(), t) > 0;
            const bool in1 = std::count(tok1.begin(), tok1.end(), t) > 0;
            EXPECT_EQ(std::bit_cast<uint32_t>(out[size_t(t * 80 + r)]),
                      std::bit_cast<uint32_t>(in0 ? r0[size_t(t * 40 + r)] : 0.f));
            EXPECT_EQ(std::bit_cast<uint32_t>(out[size_t(t * 80 + 40 + r)]),
                      std::bit_cast<uint32_t>(in1 ? r1[size_t(t * 40 + r)] : 0.f));
        }
}

TEST(Matmul, DecodeJobsOnSeveralThreadsComputeEveryRowOnce) {
    // One token over three matrices in one region, large enough for the threaded path: each
    // thread runs its own contiguous share of the row chunks, then takes what is left of the
    // others' from the back. Outputs start as NaN, so a chunk nobody ran shows.
    const OwnedMatrix A = make_matrix(TensorType::Q8_0, 600, 1024, 21);
    const OwnedMatrix B = make_matrix(TensorType::IQ2_XXS, 517, 1024, 22);
    const OwnedMatrix C = make_matrix(TensorType::F16, 333, 512, 23);
    const auto X = gaussian(1024, 24);
    const OwnedMatrix* mats[] = {&A, &B, &C};
    std::vector<Activations> acts(3);
    std::vector<std::vector<float>> want(3);
    for (int m = 0; m < 3; ++m) {
        acts[size_t(m)].set(X.data(), 1, mats[m]->m.cols, quant::dot_type(mats[m]->m.type));
        want[size_t(m)] = reference(mats[m]->m, X.data(), 1);
    }
    for (int threads : {2, 3, 4}) {
        ThreadPool pool(threads);
        std::vector<std::vector<float>> y(3);
        std::vector<const void*> a(3);
        std::vector<float*> out(3);
        std::vector<MatmulJob> jobs;
        for (int m = 0; m < 3; ++m) {
            y[size_t(m)].assign(size_t(mats[m]->m.rows), std::numeric_limits<float>::quiet_NaN());
            a[size_t(m)] = acts[size_t(m)].row(0);
            out[size_t(m)] = y[size_t(m)].data();
        }
        for (int m = 0; m < 3; ++m) jobs.push_back({mats[m]->m, &a[size_t(m)], &out[size_t(m)], 1});
        matmul_jobs(jobs.data(), jobs.size(), pool);
        for (int m = 0; m < 3; ++m)
            expect_same_bits(y[size_t(m)], want[size_t(m)],
                             (tensor_type_name(mats[m]->m.type) + ", threads " + std::to_string(threads)).c_str());
    }
}

TEST(Matmul, GroupedEqualsPerGroupProducts) {
    // 3 groups of 20 rows over slices of 256 values, 5 tokens.
    const int64_t G = 3, R = 20, K = 256, n = 5;
    const OwnedMatrix W = make_matrix(TensorType::Q8_0, G * R, K, 12);
    const auto X = gaussian(n * G * K, 13);
    ThreadPool pool(2);
    std::vector<float> Y(size_t(n * G * R)), want(size_t(n * G * R));
    matmul_grouped(W.m, G, X.data(), n, Y.data(), pool);
    for (int64_t g = 0; g < G; ++g)
        for (int64_t t = 0; t < n; ++t)
            matmul(W.m.slice_rows(g * R, R), &X[size_t((t * G + g) * K)], 1, &want[size_t(t * G * R + g * R)],
                   pool);
    expect_same_bits(Y, want, "grouped");
    EXPECT_THROW(matmul_grouped(W.m, 7, X.data(), n, Y.data(), pool), Error);
}

TEST(Matmul, SharedInputEqualsOneProductPerMatrix) {
    // Matrices of four dot types (Q8_0, Q8_K twice, F16, F32) over one input, in one region;
    // the second call reuses the converted copies with a different input and token count.
    const int64_t K = 512;
    const OwnedMatrix W[] = {make_matrix(TensorType::Q8_0, 37, K, 21), make_matrix(TensorType::F16, 19, K, 22),
                             make_matrix(TensorType::Q2_K, 23, K, 23), make_matrix(TensorType::IQ2_XXS, 9, K, 24),
                             make_matrix(TensorType::F32, 5, K, 25)};
    for (int64_t n : {1, 3, 70}) {
        const auto X = gaussian(n * K, uint32_t(30 + n));
        for (int threads : {1, 2, 3}) {
            ThreadPool pool(threads);
            std::vector<std::vector<float>> Y;
            std::vector<Product> products;
            for (const auto& w : W) Y.emplace_back(size_t(n * w.m.rows), std::numeric_limits<float>::quiet_NaN());
            for (size_t i = 0; i < std::size(W); ++i) products.push_back({&W[i].m, Y[i].data()});
            matmul_shared_input(X.data(), n, K, products, pool);
            for (size_t i = 0; i < std::size(W); ++i)
                expect_same_bits(Y[i], reference(W[i].m, X.data(), n), tensor_type_name(W[i].m.type).c_str());
        }
    }
}

TEST(Matmul, SharedInputRejectsAMatrixOfOtherWidth) {
    const OwnedMatrix a = make_matrix(TensorType::Q8_0, 4, 64, 1), b = make_matrix(TensorType::Q8_0, 4, 96, 2);
    ThreadPool pool(1);
    const auto x = gaussian(96, 3);
    std::vector<float> ya(4), yb(4);
    const Product products[] = {{&a.m, ya.data()}, {&b.m, yb.data()}};
    EXPECT_THROW(matmul_shared_input(x.data(), 1, 64, products, pool), Error);
}

TEST(Matmul, CompatModeStillEqualsItsOwnDotKernel) {
    quant::set_ggml_compat(true);
    const OwnedMatrix W = make_matrix(TensorType::Q8_0, 33, 1024, 9);
    const auto X = gaussian(6 * 1024, 10);
    ThreadPool pool(2);
    std::vector<float> Y(6 * 33);
    matmul(W.m, X.data(), 6, Y.data(), pool);
    const auto want = reference(W.m, X.data(), 6);
    quant::set_ggml_compat(false);
    expect_same_bits(Y, want, "compat");
}

}  // namespace
}  // namespace ds4::ops
