// membw_probe: memory read bandwidth, the ceiling for decode (which streams the weights once
// per token). Each repetition sums a buffer far larger than the caches (default 1 GiB) with
// wide vector loads, split into contiguous ranges over the threads (default 2); the result is
// the median over the repetitions, in GB/s (1e9 bytes per second). It reads both with plain
// loads and with software prefetch ahead of them, interleaved, and reports the faster way;
// the buffer is on transparent huge pages where the kernel allows.
//
//   membw_probe [--mib 1024] [--threads 2] [--reps 9]
//
// Prints one line: "membw_probe: ... median X GB/s (min A, max B)".
#include <immintrin.h>
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/thread_count.h"
#include "common/thread_pool.h"
#include "quant/prefetch.h"

namespace {

// Sums of n floats (n a multiple of 64, p 64-byte aligned); four accumulators keep several
// loads in flight, which is what it takes to saturate the memory bus. With `Ahead`, each step
// also asks for the lines kPrefetchAhead (12 KiB) ahead (software prefetch): on this machine that reads faster
// than the hardware prefetcher alone, and the decode kernels do it (quant/prefetch.h), so
// the probe measures both ways and reports the faster.
template <bool Ahead>
__attribute__((target("avx512f"))) float sum_avx512(const float* p, int64_t n) {
    constexpr int64_t kAhead = ds4::quant::kPrefetchAhead / sizeof(float);
    __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
    for (int64_t i = 0; i < n; i += 64) {
        if (Ahead && i + kAhead < n)
            for (int k = 0; k < 64; k += 16)
                _mm_prefetch(reinterpret_cast<const char*>(p + i + kAhead + k), _MM_HINT_T0);
        a = _mm512_add_ps(a, _mm512_load_ps(p + i));
        b = _mm512_add_ps(b, _mm512_load_ps(p + i + 16));
        c = _mm512_add_ps(c, _mm512_load_ps(p + i + 32));
        d = _mm512_add_ps(d, _mm512_load_ps(p + i + 48));
    }
    alignas(64) float lanes[16];
    _mm512_store_ps(lanes, _mm512_add_ps(_mm512_add_ps(a, b), _mm512_add_ps(c, d)));
    float s = 0;
    for (float v : lanes) s += v;
    return s;
}

template <bool Ahead>
__attribute__((target("avx2"))) float sum_avx2(const float* p, int64_t n) {
    constexpr int64_t kAhead = ds4::quant::kPrefetchAhead / sizeof(float);
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    for (int64_t i = 0; i < n; i += 32) {
        if (Ahead && i + kAhead < n)
            for (int k = 0; k < 32; k += 16)
                _mm_prefetch(reinterpret_cast<const char*>(p + i + kAhead + k), _MM_HINT_T0);
        a = _mm256_add_ps(a, _mm256_load_ps(p + i));
        b = _mm256_add_ps(b, _mm256_load_ps(p + i + 8));
        c = _mm256_add_ps(c, _mm256_load_ps(p + i + 16));
        d = _mm256_add_ps(d, _mm256_load_ps(p + i + 24));
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, _mm256_add_ps(_mm256_add_ps(a, b), _mm256_add_ps(c, d)));
    float s = 0;
    for (float v : lanes) s += v;
    return s;
}

template <bool Ahead>
float sum_scalar(const float* p, int64_t n) {
    float s[8] = {};
    for (int64_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; ++k) s[k] += p[i + k];
    float t = 0;
    for (float v : s) t += v;
    return t;
}

using SumFn = float (*)(const float*, int64_t);
struct Sums {
    const char* isa;
    SumFn plain, ahead;
};
Sums best_sums() {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return {"avx512", sum_avx512<false>, sum_avx512<true>};
    if (__builtin_cpu_supports("avx2")) return {"avx2", sum_avx2<false>, sum_avx2<true>};
    return {"scalar", sum_scalar<false>, sum_scalar<true>};
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

int64_t parse_int(const char* flag, const char* v, int64_t lo) {
    char* end = nullptr;
    const long long x = std::strtoll(v, &end, 10);
    if (end == v || *end != '\0' || x < lo) ds4::fail("{} '{}': expected an integer >= {}", flag, v, lo);
    return x;
}

int run(int argc, char** argv) {
    int64_t mib = 1024, threads = 2, reps = 9;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::printf("usage: membw_probe [--mib 1024] [--threads 2] [--reps 9]\n");
            return 0;
        }
        if (i + 1 >= argc) ds4::fail("{}: missing value (see --help)", a);
        const char* v = argv[++i];
        if (a == "--mib") mib = parse_int("--mib", v, 1);
        else if (a == "--threads") threads = ds4::resolve_threads(parse_int("--threads", v, 1));
        else if (a == "--reps") reps = parse_int("--reps", v, 1);
        else ds4::fail("unknown option {} (see --help)", a);
    }
    const int64_t n = mib * (1 << 20) / int64_t(sizeof(float));  // a multiple of 64
    // On transparent huge pages, as ds4 maps the weights (gguf/reader.cpp): with 4 KiB pages
    // the TLB misses cost this probe ~10% (THP "madvise" mode gives malloc'd memory 4 KiB
    // pages unless advised).
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t bytes = (size_t(n) * sizeof(float) + kHuge - 1) / kHuge * kHuge;
    std::unique_ptr<float, void (*)(void*)> buf(static_cast<float*>(std::aligned_alloc(kHuge, bytes)),
                                                &std::free);
    if (!buf) ds4::fail("cannot allocate {} MiB", mib);
#ifdef MADV_HUGEPAGE
    madvise(buf.get(), bytes, MADV_HUGEPAGE);  // advice only: fine if THP is off
#endif
    ds4::ThreadPool pool{static_cast<int>(threads)};
    constexpr int64_t kGrain = 1 << 14;  // floats per range unit: 64 KiB, keeps 64-float steps
    // First touch from the same threads and ranges that will read it.
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) buf.get()[i] = float(i & 7);
    }, kGrain);

    const Sums sums = best_sums();
    std::vector<double> gbps[2];  // [0]: plain loads, [1]: with software prefetch
    std::mutex mu;
    double total = 0;  // consumed below so the loads cannot be optimized away
    for (int64_t r = 0; r <= reps; ++r) {  // repetition 0 is a warm-up
        for (int mode = 0; mode < 2; ++mode) {  // interleaved: both see the same minutes
            const SumFn sum = mode ? sums.ahead : sums.plain;
            const auto t0 = std::chrono::steady_clock::now();
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                const float part = sum(buf.get() + b, e - b);
                std::lock_guard<std::mutex> lock(mu);
                total += part;
            }, kGrain);
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (r > 0) gbps[mode].push_back(double(n) * sizeof(float) / s / 1e9);
        }
    }
    const int best = median(gbps[1]) > median(gbps[0]) ? 1 : 0;
    std::vector<double>& g = gbps[best];
    std::sort(g.begin(), g.end());
    std::printf("membw_probe: %lld MiB, %lld threads, %s loads, %lld reps: median %.2f GB/s "
                "(min %.2f, max %.2f; %s; plain loads %.2f, with prefetch %.2f)%s\n",
                static_cast<long long>(mib), static_cast<long long>(threads), sums.isa,
                static_cast<long long>(reps), g[g.size() / 2], g.front(), g.back(),
                best ? "with software prefetch" : "plain loads", median(gbps[0]), median(gbps[1]),
                total < 0 ? " (negative sum?)" : "");
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "membw_probe: %s\n", e.what());
    }
    return 1;
}
