#include "machine_limits.h"

#include <immintrin.h>
#include <sys/mman.h>
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "common/error.h"
#include "common/thread_pool.h"
#include "gguf/reader.h"
#include "gguf/tensor_type.h"
#include "model/deepseek4/config.h"
#include "model/glm/config.h"
#include "quant/prefetch.h"

namespace ds4::bench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// CPU seconds of the calling thread: on a loaded machine the scheduler takes the core away
// for whole slices, which wall time would count as the loop's.
double thread_seconds() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Sums of n floats (n a multiple of 64, p 64-byte aligned); four accumulators keep several
// loads in flight, which is what it takes to saturate the memory bus. With `Ahead`, each
// step also asks for the lines kPrefetchAhead ahead, as the decode kernels do.
template <bool Ahead>
__attribute__((target("avx512f"))) float sum_avx512(const float* p, int64_t n) {
    constexpr int64_t kAhead = quant::kPrefetchAhead / sizeof(float);
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
    constexpr int64_t kAhead = quant::kPrefetchAhead / sizeof(float);
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

// Cycles of a chain of 8 dependent 1-cycle adds per iteration: the loop's own counter runs
// beside it, so an iteration takes 8 cycles and n iterations 8n.
double measure_ghz() {
    constexpr int64_t kIters = 1'000'000;
    double best = 0;
    for (int rep = 0; rep < 9; ++rep) {
        uint64_t x = 0;
        const double t0 = thread_seconds();
        for (int64_t i = 0; i < kIters; ++i)
            asm volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\t"
                         "add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0"
                         : "+r"(x));
        best = std::max(best, 8.0 * double(kIters) / (thread_seconds() - t0) / 1e9);
    }
    return best;
}

// vpdpbusd per second on one thread: 16 independent accumulators held in registers (written
// in assembly: the compiler kept an array of them in memory), more than the latency x
// throughput product of any core seen.
__attribute__((target("avx512f"))) double measure_vnni_per_second() {
    constexpr int64_t kIters = 200'000;
    double best = 0;
    for (int rep = 0; rep < 9; ++rep) {
        int64_t n = kIters;
        const double t0 = thread_seconds();
#define DS4_VNNI(k) "vpdpbusd %%zmm17, %%zmm16, %%zmm" #k "\n\t"
        asm volatile(
            "vpternlogd $0xff, %%zmm16, %%zmm16, %%zmm16\n\t"
            "vpabsb %%zmm16, %%zmm17\n\t"
            "1:\n\t"
            DS4_VNNI(0) DS4_VNNI(1) DS4_VNNI(2) DS4_VNNI(3) DS4_VNNI(4) DS4_VNNI(5) DS4_VNNI(6) DS4_VNNI(7)
            DS4_VNNI(8) DS4_VNNI(9) DS4_VNNI(10) DS4_VNNI(11) DS4_VNNI(12) DS4_VNNI(13) DS4_VNNI(14) DS4_VNNI(15)
            "dec %[n]\n\t"
            "jnz 1b\n\t"
            "vzeroupper"
            : [n] "+r"(n)
            :
            : "cc", "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
              "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17");
#undef DS4_VNNI
        best = std::max(best, 16.0 * double(kIters) / (thread_seconds() - t0));
    }
    return best;
}

}  // namespace

Bandwidth probe_bandwidth(int64_t mib, int threads, int64_t reps) {
    const int64_t n = mib * (1 << 20) / int64_t(sizeof(float));  // a multiple of 64
    // On transparent huge pages, as ds4 maps the weights (gguf/reader.cpp): with 4 KiB pages
    // the TLB misses cost the probe ~10% (THP "madvise" mode gives malloc'd memory 4 KiB
    // pages unless advised).
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t bytes = (size_t(n) * sizeof(float) + kHuge - 1) / kHuge * kHuge;
    std::unique_ptr<float, void (*)(void*)> buf(static_cast<float*>(std::aligned_alloc(kHuge, bytes)),
                                                &std::free);
    if (!buf) fail("cannot allocate {} MiB for the bandwidth probe", mib);
#ifdef MADV_HUGEPAGE
    madvise(buf.get(), bytes, MADV_HUGEPAGE);  // advice only: fine if THP is off
#endif
    ThreadPool pool{threads};
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
            const auto t0 = Clock::now();
            pool.parallel_for(n, [&](int64_t b, int64_t e) {
                const float part = sum(buf.get() + b, e - b);
                std::lock_guard<std::mutex> lock(mu);
                total += part;
            }, kGrain);
            if (r > 0) gbps[mode].push_back(double(n) * sizeof(float) / seconds_since(t0) / 1e9);
        }
    }
    Bandwidth bw;
    bw.plain = median(gbps[0]);
    bw.ahead = median(gbps[1]);
    bw.prefetch = bw.ahead > bw.plain;
    const std::vector<double>& g = gbps[bw.prefetch ? 1 : 0];
    bw.gbps = bw.prefetch ? bw.ahead : bw.plain;
    bw.min = *std::min_element(g.begin(), g.end());
    bw.max = *std::max_element(g.begin(), g.end());
    bw.isa = total < 0 ? "?" : sums.isa;  // the sums are never negative: keeps `total` live
    return bw;
}

std::string Int8Peak::how() const {
    if (gops <= 0) return "int8 peak: not stated (no AVX-512 VNNI)";
    return fmt::format("int8 peak {:.0f} GOP/s = {} core(s) x {:g} vpdpbusd/cycle (measured {:.2f}) x 64 "
                       "MACs x 2 ops x {:.2f} GHz (measured: dependent adds)",
                       gops, threads, per_cycle_isa, per_cycle, ghz);
}

Int8Peak probe_int8_peak(int threads) {
    Int8Peak p;
    p.threads = threads;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512vnni") || !__builtin_cpu_supports("avx512bw")) return p;
    p.ghz = measure_ghz();
    p.per_cycle = measure_vnni_per_second() / (p.ghz * 1e9);
    p.per_cycle_isa = std::max(0.5, std::round(p.per_cycle * 2) / 2);
    p.gops = double(threads) * p.per_cycle_isa * 64 * 2 * p.ghz;
    return p;
}

namespace {

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Layer index of a "blk.L." tensor name, or -1.
int layer_of(const std::string& name) {
    if (name.rfind("blk.", 0) != 0) return -1;
    return std::stoi(name.substr(4));
}

}  // namespace

double StepCount::at(int64_t ctx) const {
    const bool skip = skips_indexer && (ctx + 1) / 4 <= int64_t(indexer_top_k);
    return all() - (skip ? indexer_query : 0);
}

StepCount count_step(const gguf::File& file) {
    StepCount c;
    bool glm = false;
    deepseek4::ModelConfig v4;
    if (file.get_string("general.architecture") == "glm-dsa") {
        const auto g = glm::GlmConfig::from_gguf(file);
        glm = true;
        c.n_layer = g.n_layer, c.n_expert = g.n_expert, c.n_expert_used = g.n_expert_used;
        c.n_vocab = g.n_vocab, c.indexer_top_k = g.indexer_top_k;
    } else {
        v4 = deepseek4::ModelConfig::from_gguf(file);
        c.n_layer = v4.n_layer, c.n_expert = v4.n_expert, c.n_expert_used = v4.n_expert_used;
        c.n_vocab = v4.n_vocab, c.indexer_top_k = v4.indexer_top_k;
        c.skips_indexer = true;
    }
    for (const auto& t : file.tensors()) {
        const double bytes = double(t.n_bytes);
        const double values = double(t.ne[0]) * double(t.ne[1]);  // of one matrix
        double read = bytes;
        if (glm && layer_of(t.name) >= int(c.n_layer)) continue;  // the MTP block
        if (t.name == "token_embd.weight" || contains(t.name, "tid2eid")) {
            read = bytes / double(t.ne[1]);  // one row: the current token's
            c.embd += read;
        } else if (contains(t.name, "_exps")) {
            if (t.ne[2] != int64_t(c.n_expert))
                fail("{} has shape {}, expected {} experts in ne[2]", t.name, t.shape_string(), c.n_expert);
            read = bytes * c.n_expert_used / c.n_expert;
            c.routed += read;
            c.prefill_macs += values * c.n_expert_used;
        } else if (contains(t.name, "_shexp")) {
            c.shared += bytes;
            c.prefill_macs += values;
        } else if (t.name == "output.weight") {
            c.output += bytes;
        } else {
            c.dense += bytes;
            if (t.ne[1] > 1) c.prefill_macs += values * double(t.ne[2] > 0 ? t.ne[2] : 1);
            const int layer = layer_of(t.name);
            const bool query = contains(t.name, "indexer.attn_q_b") || contains(t.name, "indexer.proj");
            if (query && !glm && layer >= 0 && layer < int(c.n_layer) && v4.compress_ratio(uint32_t(layer)) == 4)
                c.indexer_query += bytes;
        }
        c.by_type[tensor_type_name(t.type)] += read;
    }
    return c;
}

std::string limits_line(const Row& r, const Limits& l) {
    std::string line;
    if (r.prefill_tokens > 0 && r.prefill_tps > 0) {
        const double ops = 2 * l.count.prefill_macs, gops = ops * r.prefill_tps / 1e9;
        line += fmt::format("prefill {:.2f} t/s x {:.3f} GOP/token = {:.1f} GOP/s", r.prefill_tps, ops / 1e9, gops);
        if (l.int8_peak_gops > 0)
            line += fmt::format(" = {:.1f}% of the int8 peak ({:.0f} GOP/s)", 100 * gops / l.int8_peak_gops,
                                l.int8_peak_gops);
    }
    if (r.gen_tokens > 0 && r.gen_tps > 0 && l.membw_gbps > 0) {
        // Rows per step and steps per second: verification steps vary in rows, sequences not.
        const bool verify = r.draft_max > 0 && r.steps > 0;
        const double rows = verify ? r.rows_per_step() : double(r.sessions);
        const double tokens_per_step = verify ? r.tokens_per_step() : double(r.sessions);
        const double steps_per_s = r.gen_tps / tokens_per_step;
        const double step = l.count.step(r.ctx_tokens, rows), gbps = step * steps_per_s / 1e9;
        if (!line.empty()) line += "; ";
        if (rows == 1)
            line += fmt::format("decode {:.0f} MB/token x {:.2f} t/s", step / 1e6, r.gen_tps);
        else
            line += fmt::format("decode: a step of {:.2f} rows reads {:.0f} MB ({:.0f} + {:.2f} x {:.0f} MB of "
                                "routed experts), {:.2f} steps/s",
                                rows, step / 1e6, l.count.at(r.ctx_tokens) / 1e6, rows - 1,
                                l.count.routed / 1e6, steps_per_s);
        line += fmt::format(" = {:.2f} GB/s = {:.1f}% of the bandwidth ({:.2f} GB/s)", gbps,
                            100 * gbps / l.membw_gbps, l.membw_gbps);
        if (rows != 1)
            line += fmt::format("; memory-bound ceiling {:.2f} t/s ({:.2f}x one row)",
                                tokens_per_step * l.membw_gbps * 1e9 / step, l.count.ceiling(r.ctx_tokens, rows));
    }
    return line;
}

}  // namespace ds4::bench
