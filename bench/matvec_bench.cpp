// matvec_bench: throughput of one matrix-vector product per weight format, ours (best ISA,
// or DS4_ISA) against the llama.cpp oracle's ggml vec_dot over the same rows, on 1 and 2
// threads, in GB/s of weight bytes streamed. The matrix is sized in MiB (default 256, far
// beyond the caches) so both sides stream from DRAM; decode-time matvecs do exactly that.
//
//   matvec_bench [--mib 256 (fractions too: 0.5 stays in L2)] [--cols 4096] [--reps 7] [--threads 1,2] [--formats q8_0,f16]
//
// Both sides get the same weight bytes (quantized once by ggml_quantize_chunk; a tile of
// distinct rows repeated to fill the matrix) and the same activation blocks (our conversion,
// bit-identical to ggml's from_float), the same thread pool and row split. Each repetition
// runs ours then ggml's; the table reports medians. Printed as a Markdown table.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/huge_pages.h"
#include "common/thread_count.h"
#include "common/thread_pool.h"
#include "quant/quant.h"
#include "support/ggml_ref.h"

namespace {

using ds4::TensorType;
namespace quant = ds4::quant;

struct Options {
    double mib = 256;
    int64_t cols = 4096;
    int reps = 7;
    std::vector<int> threads = {1, 2};
    std::vector<TensorType> formats;
};

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t b = 0;
    while (b <= s.size()) {
        const size_t e = std::min(s.find(',', b), s.size());
        if (e > b) out.push_back(s.substr(b, e - b));
        b = e + 1;
    }
    return out;
}

Options parse(int argc, char** argv) {
    Options o;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (i + 1 >= argc)
            ds4::fail("{}: missing value (usage at the top of bench/matvec_bench.cpp)", a);
        const std::string v = argv[++i];
        if (a == "--mib") o.mib = std::stod(v);
        else if (a == "--cols") o.cols = std::stoll(v);
        else if (a == "--reps") o.reps = std::stoi(v);
        else if (a == "--threads") {
            o.threads.clear();
            for (const auto& t : split(v)) o.threads.push_back(ds4::resolve_threads(std::stoll(t)));
        } else if (a == "--formats") {
            for (const auto& f : split(v)) {
                auto t = ds4::tensor_type_from_name(f);
                if (!t) ds4::fail("unknown format '{}'", f);
                o.formats.push_back(*t);
            }
        } else {
            ds4::fail("unknown option {}", a);
        }
    }
    if (o.formats.empty())
        o.formats = {TensorType::F32,  TensorType::F16,  TensorType::BF16, TensorType::Q8_0,
                     TensorType::Q4_0, TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                     TensorType::Q2_K, TensorType::IQ2_XXS, TensorType::MXFP4};
    return o;
}

// Whether our side implements format t (formats still stubbed throw "not implemented").
bool implemented(TensorType t, int64_t cols) {
    try {
        std::vector<float> x(static_cast<size_t>(cols), 0.5f);
        std::vector<uint8_t> w(ds4::row_bytes(t, cols));
        std::vector<uint8_t> a(ds4::row_bytes(quant::dot_type(t), cols));
        quant::quantize_row(t, x.data(), w.data(), cols);
        quant::quantize_activation(quant::dot_type(t), x.data(), a.data(), cols);
        (void)quant::dot_kernel(t)(cols, w.data(), a.data());
        return true;
    } catch (const ds4::Error&) {
        return false;
    }
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

template <class F>
double seconds(F&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) try {
    const Options opt = parse(argc, argv);
    const ds4::oracle::Ggml* g = ds4::oracle::Ggml::get();
    if (!g) ds4::fail("{}", ds4::oracle::Ggml::reason());

    std::printf("ours: %s kernels; ggml: libggml-cpu-%s; %g MiB of weights per format, "
                "%lld columns, median of %d\n\n",
                quant::isa_name(quant::best_isa()), g->cpu_variant().c_str(),
                opt.mib, (long long)opt.cols, opt.reps);
    std::printf("| format | bits/weight | rows | threads | ours GB/s | ggml GB/s | ours/ggml |\n");
    std::printf("|---|---|---|---|---|---|---|\n");

    const int64_t n = opt.cols;
    for (TensorType t : opt.formats) {
        if (!quant::is_weight_format(t) || !implemented(t, n)) {
            std::printf("| %s | | | | not implemented | | |\n", ds4::tensor_type_name(t).c_str());
            continue;
        }
        const TensorType at = quant::dot_type(t);
        const size_t row = ds4::row_bytes(t, n);
        const int64_t rows = std::max<int64_t>(1, int64_t(opt.mib * double(1 << 20)) / int64_t(row));

        // A tile of distinct gaussian rows quantized by ggml (IQ2_XXS needs an importance
        // vector: all ones), repeated to fill the matrix.
        const int64_t tile = std::min<int64_t>(rows, 64);
        std::mt19937 rng(1);
        std::normal_distribution<float> gauss(0.0f, 1.0f);
        std::vector<float> x(size_t(tile * n));
        for (float& v : x) v = gauss(rng);
        const std::vector<float> ones(size_t(n), 1.0f);
        std::vector<uint8_t> tile_q(row * size_t(tile));
        g->quantize_chunk(t, x.data(), tile_q.data(), tile, n, ones.data());
        // Huge pages, as the model's weights get (a read copy or a MADV_HUGEPAGE mapping):
        // with 4 KiB pages every 4 KiB of a 256 MiB matrix costs a TLB walk.
        std::vector<uint8_t, ds4::HugePageAllocator<uint8_t>> W(row * size_t(rows));
        for (int64_t r = 0; r < rows; r += tile)
            std::memcpy(W.data() + size_t(r) * row, tile_q.data(),
                        row * size_t(std::min(tile, rows - r)));

        std::vector<float> av(static_cast<size_t>(n));
        for (float& v : av) v = gauss(rng);
        std::vector<uint8_t> act(ds4::row_bytes(at, n));
        quant::quantize_activation(at, av.data(), act.data(), n);

        std::vector<float> y_ours(static_cast<size_t>(rows)), y_ggml(static_cast<size_t>(rows));
        // Ours runs what a decode-time matmul runs (ops/matmul.cpp): the multi-row kernel with
        // one activation where it is the faster way, else the one-row dot per row.
        const quant::DotFn dot = quant::dot_kernel(t);
        const quant::MultiDotFn multi =
            quant::multi_dot_for_one_activation(t) ? quant::multi_dot_kernel(t) : nullptr;
        for (int threads : opt.threads) {
            ds4::ThreadPool pool(threads);
            auto run_ours = [&] {
                pool.parallel_for(rows, [&](int64_t b, int64_t e) {
                    if (multi) {
                        const void* a = act.data();
                        float* y = y_ours.data() + b;
                        multi(n, W.data() + size_t(b) * row, row, e - b, &a, 1, &y);
                        return;
                    }
                    for (int64_t r = b; r < e; ++r)
                        y_ours[size_t(r)] = dot(n, W.data() + size_t(r) * row, act.data());
                });
            };
            auto run_ggml = [&] {
                pool.parallel_for(rows, [&](int64_t b, int64_t e) {
                    for (int64_t r = b; r < e; ++r)
                        y_ggml[size_t(r)] =
                            g->vec_dot(t, n, W.data() + size_t(r) * row, act.data());
                });
            };
            run_ours();  // warm-up (page faults, frequency)
            run_ggml();
            std::vector<double> t_ours, t_ggml;
            for (int i = 0; i < opt.reps; ++i) {
                t_ours.push_back(seconds(run_ours));
                t_ggml.push_back(seconds(run_ggml));
            }
            // Sanity: the two products agree up to float summation order.
            double worst = 0, scale = 0;
            for (int64_t r = 0; r < rows; ++r) {
                worst = std::max(worst, std::fabs(double(y_ours[size_t(r)]) - y_ggml[size_t(r)]));
                scale = std::max(scale, std::fabs(double(y_ggml[size_t(r)])));
            }
            if (worst > 1e-3 * scale)
                ds4::fail("{}: ours and ggml's products differ by {} (max |y| {})",
                          ds4::tensor_type_name(t), worst, scale);
            const double gb = double(W.size()) / 1e9;
            const double ours = gb / median(t_ours), theirs = gb / median(t_ggml);
            std::printf("| %s | %.4g | %lld | %d | %.1f | %.1f | %.2f |\n",
                        ds4::tensor_type_name(t).c_str(), 8.0 * double(row) / double(n),
                        (long long)rows, threads, ours, theirs, ours / theirs);
            std::fflush(stdout);
        }
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "matvec_bench: %s\n", e.what());
    return 1;
}
