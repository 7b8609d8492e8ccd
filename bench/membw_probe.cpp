// membw_probe: memory read bandwidth, the ceiling for decode (which streams the weights once
// per token). Each repetition sums a buffer far larger than the caches (default 1 GiB) with
// wide vector loads, split into contiguous ranges over the threads (default 2); the result is
// the median over the repetitions, in GB/s (1e9 bytes per second).
//
//   membw_probe [--mib 1024] [--threads 2] [--reps 9]
//
// Prints one line: "membw_probe: ... median X GB/s (min A, max B)".
#include <immintrin.h>

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
#include "common/thread_pool.h"

namespace {

// Sums of n floats (n a multiple of 64, p 64-byte aligned); four accumulators keep several
// loads in flight, which is what it takes to saturate the memory bus.
__attribute__((target("avx512f"))) float sum_avx512(const float* p, int64_t n) {
    __m512 a = _mm512_setzero_ps(), b = a, c = a, d = a;
    for (int64_t i = 0; i < n; i += 64) {
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

__attribute__((target("avx2"))) float sum_avx2(const float* p, int64_t n) {
    __m256 a = _mm256_setzero_ps(), b = a, c = a, d = a;
    for (int64_t i = 0; i < n; i += 32) {
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

float sum_scalar(const float* p, int64_t n) {
    float s[8] = {};
    for (int64_t i = 0; i < n; i += 8)
        for (int k = 0; k < 8; ++k) s[k] += p[i + k];
    float t = 0;
    for (float v : s) t += v;
    return t;
}

using SumFn = float (*)(const float*, int64_t);
SumFn best_sum(const char** name) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) return *name = "avx512", sum_avx512;
    if (__builtin_cpu_supports("avx2")) return *name = "avx2", sum_avx2;
    return *name = "scalar", sum_scalar;
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
        else if (a == "--threads") threads = parse_int("--threads", v, 1);
        else if (a == "--reps") reps = parse_int("--reps", v, 1);
        else ds4::fail("unknown option {} (see --help)", a);
    }
    const int64_t n = mib * (1 << 20) / int64_t(sizeof(float));  // a multiple of 64
    std::unique_ptr<float, void (*)(void*)> buf(
        static_cast<float*>(std::aligned_alloc(64, size_t(n) * sizeof(float))), &std::free);
    if (!buf) ds4::fail("cannot allocate {} MiB", mib);
    ds4::ThreadPool pool{static_cast<int>(threads)};
    constexpr int64_t kGrain = 1 << 14;  // floats per range unit: 64 KiB, keeps 64-float steps
    // First touch from the same threads and ranges that will read it.
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) buf.get()[i] = float(i & 7);
    }, kGrain);

    const char* isa = nullptr;
    const SumFn sum = best_sum(&isa);
    std::vector<double> gbps;
    std::mutex mu;
    double total = 0;  // consumed below so the loads cannot be optimized away
    for (int64_t r = 0; r <= reps; ++r) {  // repetition 0 is a warm-up
        const auto t0 = std::chrono::steady_clock::now();
        pool.parallel_for(n, [&](int64_t b, int64_t e) {
            const float part = sum(buf.get() + b, e - b);
            std::lock_guard<std::mutex> lock(mu);
            total += part;
        }, kGrain);
        const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (r > 0) gbps.push_back(double(n) * sizeof(float) / s / 1e9);
    }
    std::sort(gbps.begin(), gbps.end());
    std::printf("membw_probe: %lld MiB, %lld threads, %s loads, %lld reps: median %.2f GB/s "
                "(min %.2f, max %.2f)%s\n",
                static_cast<long long>(mib), static_cast<long long>(threads), isa,
                static_cast<long long>(reps), gbps[gbps.size() / 2], gbps.front(), gbps.back(),
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
