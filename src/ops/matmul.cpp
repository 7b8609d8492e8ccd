#include "ops/matmul.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>

#include <fmt/format.h>

#include "common/error.h"

namespace ds4::ops {
namespace {

// Work split (sizes measured on Zen 5, 1 MiB L2): a token block's activations stay in L2
// (~256 KiB) while every row of an item passes over them. A decode item (one token) is a
// quarter of a thread's share of the matrix, up to 4 MiB: every new item restarts the
// stream from DRAM, and items of 64 KiB cost a third of decode speed on the 4-layer Flash file
// (17 t/s against 23 with 4 MiB; 16 KiB: 10 t/s). Batch items are 256 KiB: their kernels are
// compute-bound and pack each tile of activations once per item. Products below kInlineWork
// bytes x tokens run on the calling thread: a pool round trip costs ~20 us here, the time to
// stream ~256 KiB. Kernels that block their rows (quant::multi_dot_blocks_rows) get 1 MiB batch
// items: they convert the activations once per call, which at 256 KiB (30 rows of the
// 8192-column Q8_0 output projection) cost a fifth of the products (4096-token prefill: +2%).
constexpr size_t kActBlockBytes = 256 * 1024;
constexpr size_t kItemRowBytes = 4096 * 1024, kItemRowBytesBatch = 256 * 1024;
constexpr size_t kItemRowBytesBlocked = 1024 * 1024;
constexpr double kInlineWork = 256 * 1024;
constexpr int64_t kStreamedTokens = 8;

struct Item {
    size_t job;
    int64_t r0, r1, t0, t1;
};

// The open profile's totals (MatvecProfile), in integer nanoseconds and bytes so that the
// threads can add to them with relaxed atomics.
struct ProfileTotals {
    static constexpr size_t kTypes = 64, kRows = size_t(kProfiledRows) + 1;
    static size_t slot(TensorType t, int64_t rows) {
        return std::min(size_t(t), kTypes - 1) * kRows + size_t(std::clamp<int64_t>(rows, 0, kProfiledRows));
    }
    std::atomic<bool> open{false};
    std::array<std::atomic<int64_t>, kTypes * kRows> chunks{}, ns{}, bytes{}, macs{};
    std::atomic<int64_t> regions{0}, region_ns{0};
};
ProfileTotals g_profile;

int64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

void check_job(const MatmulJob& j) {
    if (!quant::is_weight_format(j.W.type))
        fail("matmul: weight type {} has no kernels", tensor_type_name(j.W.type));
    if (j.n_tokens < 0) fail("matmul: {} tokens", j.n_tokens);
}

void run_item_unprofiled(const MatmulJob& j, const Item& it, quant::DotFn dot, quant::MultiDotFn multi);

void run_item(const MatmulJob& j, const Item& it, quant::DotFn dot, quant::MultiDotFn multi, bool profiled) {
    if (!profiled) return run_item_unprofiled(j, it, dot, multi);
    const int64_t t0 = now_ns();
    run_item_unprofiled(j, it, dot, multi);
    const size_t k = ProfileTotals::slot(j.W.type, it.t1 - it.t0);
    g_profile.ns[k].fetch_add(now_ns() - t0, std::memory_order_relaxed);
    g_profile.chunks[k].fetch_add(1, std::memory_order_relaxed);
    g_profile.bytes[k].fetch_add(int64_t(it.r1 - it.r0) * int64_t(j.W.row_bytes), std::memory_order_relaxed);
    g_profile.macs[k].fetch_add((it.r1 - it.r0) * j.W.cols * (it.t1 - it.t0), std::memory_order_relaxed);
}

void run_item_unprofiled(const MatmulJob& j, const Item& it, quant::DotFn dot, quant::MultiDotFn multi) {
    const int64_t nt = it.t1 - it.t0, rows = it.r1 - it.r0;
    const uint8_t* W = j.W.row(it.r0);
    const void* const* act = j.act + it.t0;
    float* y[64];
    for (int64_t done = 0; done < nt; done += 64) {
        const int64_t m = std::min<int64_t>(64, nt - done);
        for (int64_t t = 0; t < m; ++t) y[t] = j.y[it.t0 + done + t] + it.r0;
        if (multi) {
            multi(j.W.cols, W, j.W.row_bytes, rows, act + done, m, y);
        } else {
            for (int64_t r = 0; r < rows; ++r)
                for (int64_t t = 0; t < m; ++t)
                    y[t][r] = dot(j.W.cols, W + size_t(r) * j.W.row_bytes, act[done + t]);
        }
    }
}

}  // namespace

void Activations::set(const float* X, int64_t n_rows, int64_t n, TensorType dot_type, ThreadPool* pool) {
    row_bytes_ = row_bytes(dot_type, n);
    if (buf_.size() < row_bytes_ * size_t(n_rows)) buf_.resize(row_bytes_ * size_t(n_rows));
    auto convert = [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t)
            quant::quantize_activation(dot_type, X + t * n, buf_.data() + size_t(t) * row_bytes_, n);
    };
    // Below ~64K values the pool's round trip costs more than the conversion.
    if (pool && pool->size() > 1 && n_rows > 1 && n_rows * n >= (int64_t(1) << 16))
        pool->parallel_for(n_rows, convert);
    else
        convert(0, n_rows);
    type_ = dot_type;
    n_ = n;
    rows_ = n_rows;
}

void matmul_jobs(const MatmulJob* jobs, size_t n_jobs, ThreadPool& pool) {
    std::vector<quant::DotFn> dots(n_jobs);
    std::vector<quant::MultiDotFn> multis(n_jobs);
    std::vector<Item> items;
    double work = 0;
    // A few rows per job (decode, or the decode rows of a few sequences batched together):
    // streamed like decode, each thread through its own contiguous run of large items.
    bool streamed = true;
    for (size_t i = 0; i < n_jobs; ++i) streamed = streamed && jobs[i].n_tokens <= kStreamedTokens;
    for (size_t i = 0; i < n_jobs; ++i) {
        const MatmulJob& j = jobs[i];
        check_job(j);
        if (j.n_tokens == 0 || j.W.rows == 0) continue;
        dots[i] = quant::dot_kernel(j.W.type);
        multis[i] = j.n_tokens > 1 || quant::multi_dot_for_one_activation(j.W.type)
                        ? quant::multi_dot_kernel(j.W.type)
                        : nullptr;
        const size_t act_bytes = row_bytes(quant::dot_type(j.W.type), j.W.cols);
        const int64_t per_block = std::max<int64_t>(1, int64_t(kActBlockBytes / act_bytes));
        const int64_t t_blocks = (j.n_tokens + per_block - 1) / per_block;
        const int64_t tb = (j.n_tokens + t_blocks - 1) / t_blocks;  // balanced token blocks
        const size_t item_bytes = j.n_tokens == 1 || streamed                  ? kItemRowBytes
                                  : quant::multi_dot_blocks_rows(j.W.type) ? kItemRowBytesBlocked
                                                                           : kItemRowBytesBatch;
        int64_t rows_per_item = std::max<int64_t>(4, int64_t(item_bytes / j.W.row_bytes));
        // Enough items for the threads to balance even when a matrix is small.
        rows_per_item = std::min(rows_per_item,
                                 std::max<int64_t>(4, (j.W.rows + 4 * pool.size() - 1) / (4 * pool.size())));
        for (int64_t t0 = 0; t0 < j.n_tokens; t0 += tb)
            for (int64_t r0 = 0; r0 < j.W.rows; r0 += rows_per_item)
                items.push_back({i, r0, std::min(j.W.rows, r0 + rows_per_item), t0,
                                 std::min(j.n_tokens, t0 + tb)});
        work += double(j.W.rows) * double(j.W.row_bytes) * double(j.n_tokens);
    }
    if (items.empty()) return;
    bool few = true;  // every job a few rows long: a step of decode (the profile's products)
    for (size_t i = 0; i < n_jobs; ++i) few = few && jobs[i].n_tokens <= kProfiledRows;
    const bool profiled = few && g_profile.open.load(std::memory_order_relaxed);
    const int64_t region_start = profiled ? now_ns() : 0;
    auto run = [&](size_t i) {
        const Item& it = items[i];
        run_item(jobs[it.job], it, dots[it.job], multis[it.job], profiled);
    };
    if (pool.size() == 1 || work < kInlineWork) {
        for (size_t i = 0; i < items.size(); ++i) run(i);
    } else if (streamed) {
        // Decode: thread k owns the k-th contiguous run of the items and takes them front to
        // back, so it streams consecutive rows (its prefetch reaches into its own next item,
        // in pages it has just touched: a thread's first touch of a matrix measured 9-11 us
        // per chunk, likely address translation); when its run is done it takes the others'
        // items from the back. Claimed from one shared counter, consecutive items alternated
        // between the threads, and each started every item of an expert matrix cold (4-layer
        // Flash file, one decode step, alternating in one process: +2.4% t/s, 7 of 8 pairs).
        const int T = pool.size();
        const size_t N = items.size();
        struct alignas(64) Run {
            std::atomic<uint64_t> fb;  // front << 32 | back: its unclaimed items are [front, back)
        };
        std::vector<Run> runs(static_cast<size_t>(T));
        for (int k = 0; k < T; ++k)
            runs[size_t(k)].fb.store(uint64_t(N * size_t(k) / size_t(T)) << 32 | uint64_t(N * size_t(k + 1) / size_t(T)));
        auto claim = [](Run& r, bool front) -> int64_t {
            uint64_t v = r.fb.load(std::memory_order_relaxed);
            for (;;) {
                const uint64_t f = v >> 32, b = v & 0xffffffffu;
                if (f >= b) return -1;
                const uint64_t w = front ? (f + 1) << 32 | b : f << 32 | (b - 1);
                if (r.fb.compare_exchange_weak(v, w, std::memory_order_relaxed)) return int64_t(front ? f : b - 1);
            }
        };
        pool.parallel_for(T, [&](int64_t k, int64_t) {
            for (int64_t i; (i = claim(runs[size_t(k)], true)) >= 0;) run(size_t(i));
            for (int d = 1; d < T; ++d)
                for (int64_t i; (i = claim(runs[size_t((k + d) % T)], false)) >= 0;) run(size_t(i));
        });
    } else {
        std::atomic<size_t> next{0};
        pool.parallel_for(pool.size(), [&](int64_t, int64_t) {
            for (size_t i = next.fetch_add(1, std::memory_order_relaxed); i < items.size();
                 i = next.fetch_add(1, std::memory_order_relaxed))
                run(i);
        });
    }
    if (profiled) {
        g_profile.regions.fetch_add(1, std::memory_order_relaxed);
        g_profile.region_ns.fetch_add(now_ns() - region_start, std::memory_order_relaxed);
    }
}

void matvec_profile_open() {
    for (size_t k = 0; k < g_profile.chunks.size(); ++k) {
        g_profile.chunks[k].store(0);
        g_profile.ns[k].store(0);
        g_profile.bytes[k].store(0);
        g_profile.macs[k].store(0);
    }
    g_profile.regions.store(0);
    g_profile.region_ns.store(0);
    g_profile.open.store(true);
}

MatvecProfile matvec_profile_close() {
    g_profile.open.store(false);
    MatvecProfile p;
    for (size_t k = 0; k < g_profile.chunks.size(); ++k) {
        if (g_profile.chunks[k].load() == 0) continue;
        MatvecProfile::Entry e;
        e.type = TensorType(k / ProfileTotals::kRows);
        e.rows = int64_t(k % ProfileTotals::kRows);
        e.chunks = g_profile.chunks[k].load();
        e.thread_seconds = 1e-9 * double(g_profile.ns[k].load());
        e.bytes = double(g_profile.bytes[k].load());
        e.macs = double(g_profile.macs[k].load());
        p.entries.push_back(e);
    }
    p.regions = g_profile.regions.load();
    p.region_seconds = 1e-9 * double(g_profile.region_ns.load());
    return p;
}

std::string matvec_profile_table(const MatvecProfile& p, double steps, double wall_seconds, int threads,
                                 const std::string& indent) {
    const double per = steps > 0 ? 1.0 / steps : 0.0;
    double thread_total = 0;
    for (const auto& e : p.entries) thread_total += e.thread_seconds;
    std::string out = indent + "| format | rows per call | MB read per step | thread ms per step | GB/s of weights per "
                               "thread | GMAC/s per thread | share of product time |\n" +
                      indent + "|---|---|---|---|---|---|---|\n";
    for (const auto& e : p.entries) {
        const double s = e.thread_seconds > 0 ? e.thread_seconds : 1e-12;
        out += indent + fmt::format("| {} | {} | {:.1f} | {:.2f} | {:.1f} | {:.1f} | {:.1f}% |\n",
                                    tensor_type_name(e.type), e.rows, 1e-6 * e.bytes * per,
                                    1e3 * e.thread_seconds * per, 1e-9 * e.bytes / s, 1e-9 * e.macs / s,
                                    thread_total > 0 ? 100.0 * e.thread_seconds / thread_total : 0.0);
    }
    const double regions = p.region_seconds > 0 ? p.region_seconds : 1e-12;
    out += indent + fmt::format("products: {:.1f} parallel regions per step, {:.2f} ms wall ({:.0f}% of the step; "
                                "{} threads busy {:.0f}% of it); outside them: {:.2f} ms\n",
                                double(p.regions) * per, 1e3 * p.region_seconds * per,
                                wall_seconds > 0 ? 100.0 * p.region_seconds / wall_seconds : 0.0, threads,
                                100.0 * thread_total / (double(std::max(threads, 1)) * regions),
                                1e3 * (wall_seconds - p.region_seconds) * per);
    return out;
}

void matmul(const Matrix& W, const float* X, int64_t n_tokens, float* Y, ThreadPool& pool) {
    if (n_tokens <= 0) return;
    thread_local Activations acts;
    acts.set(X, n_tokens, W.cols, quant::dot_type(W.type), &pool);
    std::vector<const void*> act(static_cast<size_t>(n_tokens));
    std::vector<float*> out(static_cast<size_t>(n_tokens));
    for (int64_t t = 0; t < n_tokens; ++t) {
        act[size_t(t)] = acts.row(t);
        out[size_t(t)] = Y + t * W.rows;
    }
    const MatmulJob job{W, act.data(), out.data(), n_tokens};
    matmul_jobs(&job, 1, pool);
}

void matmul_shared_input(const float* X, int64_t n_tokens, int64_t cols, std::span<const Product> products,
                         ThreadPool& pool) {
    if (n_tokens <= 0 || products.empty()) return;
    // One converted copy of X per dot type (a handful of types exist), kept between calls.
    thread_local std::vector<std::pair<TensorType, Activations>> converted;
    if (converted.capacity() < 8) converted.reserve(8);
    size_t used = 0;
    auto input_for = [&](TensorType dot) -> const Activations& {
        for (size_t i = 0; i < used; ++i)
            if (converted[i].first == dot) return converted[i].second;
        if (converted.size() <= used) converted.emplace_back();
        converted[used].first = dot;
        converted[used].second.set(X, n_tokens, cols, dot, &pool);
        return converted[used++].second;
    };
    std::vector<const void*> act(products.size() * size_t(n_tokens));
    std::vector<float*> out(products.size() * size_t(n_tokens));
    std::vector<MatmulJob> jobs;
    jobs.reserve(products.size());
    for (size_t i = 0; i < products.size(); ++i) {
        const Matrix& W = *products[i].W;
        if (W.cols != cols) fail("matmul: a {}-column matrix against {}-value inputs", W.cols, cols);
        const Activations& in = input_for(quant::dot_type(W.type));
        const size_t o = i * size_t(n_tokens);
        for (int64_t t = 0; t < n_tokens; ++t) {
            act[o + size_t(t)] = in.row(t);
            out[o + size_t(t)] = products[i].Y + t * W.rows;
        }
        jobs.push_back({W, act.data() + o, out.data() + o, n_tokens});
    }
    matmul_jobs(jobs.data(), jobs.size(), pool);
}

void matmul_grouped(const Matrix& W, int64_t groups, const float* X, int64_t n_tokens, float* Y,
                    ThreadPool& pool) {
    if (groups <= 0 || W.rows % groups != 0)
        fail("matmul_grouped: {} rows do not split into {} groups", W.rows, groups);
    if (n_tokens <= 0) return;
    const int64_t R = W.rows / groups;
    // Token t's slice g is row t*groups + g of X viewed as [n_tokens*groups][W.cols].
    thread_local Activations acts;
    acts.set(X, n_tokens * groups, W.cols, quant::dot_type(W.type), &pool);
    std::vector<const void*> act(static_cast<size_t>(n_tokens * groups));
    std::vector<float*> out(static_cast<size_t>(n_tokens * groups));
    std::vector<MatmulJob> jobs;
    for (int64_t g = 0; g < groups; ++g) {
        const size_t o = size_t(g * n_tokens);
        for (int64_t t = 0; t < n_tokens; ++t) {
            act[o + size_t(t)] = acts.row(t * groups + g);
            out[o + size_t(t)] = Y + t * W.rows + g * R;
        }
        jobs.push_back({W.slice_rows(g * R, R), act.data() + o, out.data() + o, n_tokens});
    }
    matmul_jobs(jobs.data(), jobs.size(), pool);
}

}  // namespace ds4::ops
