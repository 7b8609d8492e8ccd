// kernel_ab: an older revision's IQ2_XXS, Q2_K or Q8_0 AVX-512 multi-row kernel against this tree's,
// alternating call by call in one process, one thread (pin it with taskset). Built by
// bench/kernel_ab.sh, which compiles the older kernel files into namespace ds4old beside the
// build's libraries. Every call's results must be equal bit for bit (or it fails), and times
// are the calling thread's CPU time: on a crowded VM the wall time of a call mostly measures
// the scheduler, while CPU time leaves out the time the thread waited descheduled (memory
// stalls still count).
//
//   kernel_ab FORMAT[:COLS] KIB REPS [T ...]
//       FORMAT iq2_xxs (4096 columns), q2_k (2048 columns) or q8_0 (4096), COLS to change it;
//       KIB of weights (1024: L2; 262144: DRAM), best of REPS alternating pairs, activation
//       row counts T (1,2,3,4,5,6,8)
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "gguf/tensor_type.h"
#include "quant/quant.h"

namespace ds4old::quant {  // the older revision's kernels (bench/kernel_ab.sh)
void multi_iq2_xxs_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows, const void* const* act,
                          int64_t n_act, float* const* y);
void multi_q2_k_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows, const void* const* act,
                       int64_t n_act, float* const* y);
void multi_q8_0_avx512(int64_t n, const void* W, size_t w_stride, int64_t rows, const void* const* act,
                       int64_t n_act, float* const* y);
}  // namespace ds4old::quant

namespace {

double thread_seconds() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
    using namespace ds4;
    if (argc < 4) {
        std::fprintf(stderr, "usage: kernel_ab iq2_xxs|q2_k|q8_0[:COLS] KIB REPS [T ...]\n");
        return 2;
    }
    const std::string spec = argv[1];
    const std::string fmt = spec.substr(0, spec.find(':'));
    const int64_t kib = std::stoll(argv[2]);
    const int reps = std::stoi(argv[3]);
    std::vector<int> counts = {1, 2, 3, 4, 5, 6, 8};
    if (argc > 4) {
        counts.clear();
        for (int i = 4; i < argc; ++i) counts.push_back(std::stoi(argv[i]));
    }
    const bool q2k = fmt == "q2_k", q80 = fmt == "q8_0";
    if (!q2k && !q80 && fmt != "iq2_xxs") {
        std::fprintf(stderr, "kernel_ab: unknown format %s\n", fmt.c_str());
        return 2;
    }
    const TensorType t = q2k ? TensorType::Q2_K : q80 ? TensorType::Q8_0 : TensorType::IQ2_XXS;
    // The routed experts' down and gate/up rows; Q8_0: the attention's 4096-column products.
    const int64_t cols = spec.find(':') != std::string::npos ? std::stoll(spec.substr(spec.find(':') + 1))
                         : q2k                               ? 2048
                                                             : 4096;
    const auto old_kernel = q2k   ? ds4old::quant::multi_q2_k_avx512
                            : q80 ? ds4old::quant::multi_q8_0_avx512
                                  : ds4old::quant::multi_iq2_xxs_avx512;
    const auto new_kernel = quant::multi_dot_kernel(t, quant::Isa::Avx512Vnni);
    if (!quant::isa_supported(quant::Isa::Avx512Vnni) || !new_kernel) {
        std::fprintf(stderr, "kernel_ab: needs AVX-512 VNNI\n");
        return 1;
    }
    const size_t rb = row_bytes(t, cols);
    const int64_t rows = std::max<int64_t>(1, kib * 1024 / int64_t(rb));
    std::mt19937 rng(1);
    std::normal_distribution<float> g(0.f, 1.f);
    std::vector<float> x(static_cast<size_t>(cols));
    // 64 quantized rows repeated (quantizing 256 MiB would take minutes).
    std::vector<uint8_t> proto(rb * 64), W(rb * size_t(rows));
    for (int r = 0; r < 64; ++r) {
        for (auto& v : x) v = g(rng);
        quant::quantize_row(t, x.data(), proto.data() + size_t(r) * rb, cols);
    }
    for (int64_t r = 0; r < rows; ++r) std::memcpy(W.data() + size_t(r) * rb, proto.data() + size_t(r * 7 % 64) * rb, rb);
    const TensorType at = quant::dot_type(t);
    const size_t ab = row_bytes(at, cols);
    std::printf("%s, %lld columns, %lld rows (%.1f MiB), best of %d alternating pairs, thread CPU time\n\n",
                fmt.c_str(), (long long)cols, (long long)rows, double(W.size()) / 1048576.0, reps);
    std::printf("| rows | old GB/s | new GB/s | old GMAC/s | new GMAC/s | new/old | cost, old | cost, new |\n"
                "|---|---|---|---|---|---|---|---|\n");
    double one_row = 0;  // seconds of the old kernel's one-row call (cost = a call / that)
    for (const int nt : counts) {
        std::vector<uint8_t> A(ab * size_t(nt));
        std::vector<const void*> act(static_cast<size_t>(nt));
        for (int i = 0; i < nt; ++i) {
            for (auto& v : x) v = g(rng);
            quant::quantize_activation(at, x.data(), A.data() + size_t(i) * ab, cols);
            act[size_t(i)] = A.data() + size_t(i) * ab;
        }
        std::vector<float> Y[2] = {std::vector<float>(size_t(rows * nt)), std::vector<float>(size_t(rows * nt))};
        std::vector<float*> y[2] = {std::vector<float*>(size_t(nt)), std::vector<float*>(size_t(nt))};
        for (int m = 0; m < 2; ++m)
            for (int i = 0; i < nt; ++i) y[m][size_t(i)] = Y[m].data() + size_t(i) * size_t(rows);
        double best[2] = {1e30, 1e30};
        for (int r = 0; r < reps; ++r)
            for (int m = 0; m < 2; ++m) {
                const double t0 = thread_seconds();
                (m ? new_kernel : old_kernel)(cols, W.data(), rb, rows, act.data(), nt, y[m].data());
                best[m] = std::min(best[m], thread_seconds() - t0);
            }
        if (std::memcmp(Y[0].data(), Y[1].data(), Y[0].size() * sizeof(float)) != 0) {
            std::fprintf(stderr, "kernel_ab: %d rows: old and new results differ\n", nt);
            return 1;
        }
        if (one_row == 0) one_row = best[0] / nt;  // the first count stands in when 1 is not run
        const double gb = double(W.size()) / 1e9, mac = double(rows) * double(cols) * nt / 1e9;
        std::printf("| %d | %.1f | %.1f | %.1f | %.1f | %.2f | %.2f | %.2f |\n", nt, gb / best[0], gb / best[1],
                    mac / best[0], mac / best[1], best[0] / best[1], best[0] / one_row, best[1] / one_row);
        std::fflush(stdout);
    }
    return 0;
}
