// attention_bench: speed of the sink-attention kernel (ops/attention.h) for one query position
// over rows that live apart in memory, as a prefill's window and compressed rows do: n_rows
// rows picked at random from a pool of 4x as many, head_dim floats each, all heads sharing
// them (MQA). Single thread; prints GFLOP/s (QK and PV: 4 * heads * rows * head_dim flops)
// and microseconds per position, best of --reps, for each row count.
//
// --indexer instead times the indexer scores (ops/indexer.h) of one query over n_rows
// contiguous compressed rows (--heads indexer heads of --head-dim, e.g. 64 x 128 for Flash),
// beside the same scores as one F32 dot per (row, head), the way they were computed before.
//
//   attention_bench [--heads 64] [--head-dim 512] [--rows 160,640,1152] [--positions 64]
//                   [--reps 7] [--isa avx512|avx2|scalar] [--indexer]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "timing.h"
#include "common/error.h"
#include "ops/attention.h"
#include "ops/indexer.h"
#include "quant/quant.h"

namespace {

std::vector<int64_t> parse_list(const std::string& v) {
    std::vector<int64_t> out;
    for (size_t p = 0; p < v.size();) {
        const size_t e = std::min(v.find(',', p), v.size());
        out.push_back(std::stoll(v.substr(p, e - p)));
        p = e + 1;
    }
    return out;
}

int indexer_bench(int heads, int dim, const std::vector<int64_t>& row_counts, int positions,
                  int reps, ds4::quant::Isa isa) {
    std::printf("indexer scores, %s, %d heads x %d dims, one thread, best of %d\n\n",
                ds4::quant::isa_name(isa), heads, dim, reps);
    std::printf("| rows | GFLOP/s | us per position | per-pair dots GFLOP/s |\n|---|---|---|---|\n");
    std::mt19937 rng(7);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::vector<float> q(size_t(positions) * size_t(heads) * size_t(dim)), w(static_cast<size_t>(heads));
    for (float& v : q) v = gauss(rng);
    for (float& v : w) v = gauss(rng);
    const ds4::quant::DotFn dot = ds4::quant::dot_kernel(ds4::TensorType::F32, isa);
    for (int64_t n_rows : row_counts) {
        std::vector<float> keys(size_t(n_rows) * size_t(dim)), score(static_cast<size_t>(n_rows));
        for (float& v : keys) v = gauss(rng);
        const double t = ds4::bench::best_seconds(reps, [&] {
            for (int p = 0; p < positions; ++p)
                ds4::ops::indexer_scores(q.data() + size_t(p) * size_t(heads) * size_t(dim), w.data(),
                                         heads, dim, keys.data(), 0, n_rows, score.data(), isa);
        });
        const double t_pairs = ds4::bench::best_seconds(reps, [&] {
            for (int p = 0; p < positions; ++p) {
                const float* qp = q.data() + size_t(p) * size_t(heads) * size_t(dim);
                for (int64_t r = 0; r < n_rows; ++r) {
                    float s = 0.0f;
                    for (int h = 0; h < heads; ++h)
                        s += w[size_t(h)] * std::max(0.0f, dot(dim, qp + size_t(h) * size_t(dim),
                                                               keys.data() + size_t(r) * size_t(dim)));
                    score[size_t(r)] = s;
                }
            }
        });
        const double flops = 2.0 * heads * double(n_rows) * dim * positions;
        std::printf("| %lld | %.1f | %.1f | %.1f |\n", (long long)n_rows, flops / t / 1e9,
                    1e6 * t / positions, flops / t_pairs / 1e9);
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) try {
    int heads = 64, hd = 512, positions = 64, reps = 7;
    std::vector<int64_t> row_counts{160, 640, 1152};
    ds4::quant::Isa isa = ds4::quant::best_isa();
    bool indexer = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--indexer") {
            indexer = true;
            continue;
        }
        if (i + 1 >= argc) ds4::fail("option {} needs a value", a);
        const std::string v = argv[++i];
        if (a == "--heads") heads = std::stoi(v);
        else if (a == "--head-dim") hd = std::stoi(v);
        else if (a == "--rows") row_counts = parse_list(v);
        else if (a == "--positions") positions = std::stoi(v);
        else if (a == "--reps") reps = std::stoi(v);
        else if (a == "--isa") {
            if (v == "avx512") isa = ds4::quant::Isa::Avx512Vnni;
            else if (v == "avx2") isa = ds4::quant::Isa::Avx2;
            else if (v == "scalar") isa = ds4::quant::Isa::Scalar;
            else ds4::fail("unknown ISA {}", v);
        } else ds4::fail("unknown option {}", a);
    }
    if (heads <= 0 || hd <= 0 || positions <= 0 || reps <= 0) ds4::fail("sizes must be positive");
    if (indexer) return indexer_bench(heads, hd, row_counts, positions, reps, isa);
    std::printf("sink attention, %s, %d heads x %d dims, one thread, best of %d\n\n",
                ds4::quant::isa_name(isa), heads, hd, reps);
    std::printf("| rows | GFLOP/s | us per position |\n|---|---|---|\n");
    std::mt19937 rng(7);
    std::normal_distribution<float> gauss(0.0f, 1.0f);
    std::vector<float> q(size_t(positions) * size_t(heads) * size_t(hd));
    std::vector<float> sinks(static_cast<size_t>(heads));
    for (float& v : q) v = gauss(rng);
    for (float& v : sinks) v = gauss(rng);
    std::vector<float> out(size_t(heads) * size_t(hd));
    for (int64_t n_rows : row_counts) {
        std::vector<float> pool(size_t(4 * n_rows) * size_t(hd));
        for (float& v : pool) v = gauss(rng);
        // Each position sees its own random subset, in increasing address order.
        std::vector<std::vector<const float*>> rows(static_cast<size_t>(positions));
        std::vector<int64_t> idx(size_t(4 * n_rows));
        for (auto& r : rows) {
            for (size_t i = 0; i < idx.size(); ++i) idx[i] = int64_t(i);
            std::shuffle(idx.begin(), idx.end(), rng);
            std::sort(idx.begin(), idx.begin() + n_rows);
            for (int64_t i = 0; i < n_rows; ++i) r.push_back(pool.data() + size_t(idx[size_t(i)]) * size_t(hd));
        }
        double best = 1e30;
        for (int rep = 0; rep < reps; ++rep) {
            const auto t0 = std::chrono::steady_clock::now();
            for (int p = 0; p < positions; ++p)
                ds4::ops::sink_attention(q.data() + size_t(p) * size_t(heads) * size_t(hd), heads, hd,
                                         rows[size_t(p)].data(), n_rows, sinks.data(), 0.04f,
                                         out.data(), isa);
            best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        const double flops = 4.0 * heads * double(n_rows) * hd * positions;
        std::printf("| %lld | %.1f | %.1f |\n", (long long)n_rows, flops / best / 1e9, 1e6 * best / positions);
    }
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "attention_bench: %s\n", e.what());
    return 1;
}
