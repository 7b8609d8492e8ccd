// multi_dot_bench: compute speed of the batched (multi-row) dot kernels against the one-row
// dot kernel, single thread, weights in L2. For each format and token count T it times
// multi_dot_kernel over all rows x T activations, and the loop of dot_kernel over the same
// pairs (bit-identical results, checked), and prints GMAC/s (weights x tokens per second).
//
//   multi_dot_bench [--kib 256] [--cols 4096] [--reps 21] [--tokens 1,2,4,8,16]
//                   [--formats iq2_xxs,q8_0]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "timing.h"
#include "common/error.h"
#include "quant/quant.h"

namespace {

using ds4::TensorType;
namespace quant = ds4::quant;

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

}  // namespace

int main(int argc, char** argv) try {
    int64_t kib = 256, cols = 4096;
    int reps = 21;
    std::vector<int64_t> tokens = {1, 2, 4, 8, 16};
    std::vector<TensorType> formats = {TensorType::F16,  TensorType::Q8_0, TensorType::Q4_0,
                                       TensorType::Q4_K, TensorType::Q5_K, TensorType::Q6_K,
                                       TensorType::Q2_K, TensorType::IQ2_XXS, TensorType::MXFP4};
    for (int i = 1; i + 1 < argc; i += 2) {
        const std::string a = argv[i], v = argv[i + 1];
        if (a == "--kib") kib = std::stoll(v);
        else if (a == "--cols") cols = std::stoll(v);
        else if (a == "--reps") reps = std::stoi(v);
        else if (a == "--tokens") {
            tokens.clear();
            for (const auto& t : split(v)) tokens.push_back(std::stoll(t));
        } else if (a == "--formats") {
            formats.clear();
            for (const auto& f : split(v)) {
                auto t = ds4::tensor_type_from_name(f);
                if (!t) ds4::fail("unknown format '{}'", f);
                formats.push_back(*t);
            }
        } else {
            ds4::fail("unknown option {}", a);
        }
    }
    std::printf("%s kernels, %lld columns, ~%lld KiB of weights, best of %d, one thread\n\n",
                quant::isa_name(quant::best_isa()), (long long)cols, (long long)kib, reps);
    std::printf("| format | tokens | dot GMAC/s | multi GMAC/s | multi/dot |\n|---|---|---|---|---|\n");
    std::mt19937 rng(1);
    std::normal_distribution<float> gauss(0.f, 1.f);
    for (TensorType t : formats) {
        const size_t rb = ds4::row_bytes(t, cols);
        const int64_t rows = std::max<int64_t>(1, kib * 1024 / int64_t(rb));
        std::vector<float> x(static_cast<size_t>(cols));
        std::vector<uint8_t> W(rb * size_t(rows));
        for (int64_t r = 0; r < rows; ++r) {
            for (auto& v : x) v = gauss(rng);
            quant::quantize_row(t, x.data(), W.data() + size_t(r) * rb, cols);
        }
        const TensorType at = quant::dot_type(t);
        const size_t ab = ds4::row_bytes(at, cols);
        const quant::DotFn dot = quant::dot_kernel(t);
        const quant::MultiDotFn multi = quant::multi_dot_kernel(t);
        for (int64_t nt : tokens) {
            std::vector<uint8_t> A(ab * size_t(nt));
            std::vector<const void*> act(static_cast<size_t>(nt));
            for (int64_t i = 0; i < nt; ++i) {
                for (auto& v : x) v = gauss(rng);
                quant::quantize_activation(at, x.data(), A.data() + size_t(i) * ab, cols);
                act[size_t(i)] = A.data() + size_t(i) * ab;
            }
            std::vector<float> Y1(size_t(rows * nt)), Y2(size_t(rows * nt));
            std::vector<float*> y(static_cast<size_t>(nt));
            for (int64_t i = 0; i < nt; ++i) y[size_t(i)] = Y2.data() + i * rows;
            const double t_dot = ds4::bench::best_seconds(reps, [&] {
                for (int64_t r = 0; r < rows; ++r)
                    for (int64_t i = 0; i < nt; ++i)
                        Y1[size_t(i * rows + r)] = dot(cols, W.data() + size_t(r) * rb, act[size_t(i)]);
            });
            double t_multi = 0;
            if (multi) {
                t_multi = ds4::bench::best_seconds(reps, [&] { multi(cols, W.data(), rb, rows, act.data(), nt, y.data()); });
                if (std::memcmp(Y1.data(), Y2.data(), Y1.size() * sizeof(float)) != 0)
                    ds4::fail("{}: multi and dot results differ", ds4::tensor_type_name(t));
            }
            const double mac = double(rows) * double(cols) * double(nt) / 1e9;
            std::printf("| %s | %lld | %.1f | %s | %s |\n", ds4::tensor_type_name(t).c_str(),
                        (long long)nt, mac / t_dot,
                        multi ? fmt::format("{:.1f}", mac / t_multi).c_str() : "-",
                        multi ? fmt::format("{:.2f}", t_dot / t_multi).c_str() : "-");
            std::fflush(stdout);
        }
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "multi_dot_bench: %s\n", e.what());
    return 1;
}
