// membw_probe: memory read bandwidth, the ceiling for decode (which streams the weights once
// per token). Each repetition sums a buffer far larger than the caches (default 1 GiB) with
// wide vector loads, split into contiguous ranges over the threads (default 2); the result is
// the median over the repetitions, in GB/s (1e9 bytes per second). It reads both with plain
// loads and with software prefetch ahead of them, interleaved, and reports the faster way;
// the buffer is on transparent huge pages where the kernel allows.
//
//   membw_probe [--mib 1024] [--threads 2] [--reps 9] [--int8-peak]
//
// Prints one line: "membw_probe: ... median X GB/s (min A, max B)". --int8-peak adds the
// int8 compute peak of --threads cores, measured as tools/ds4-bench/machine_limits.h says:
// "int8_peak_gops G" and a line saying how. The probe itself is machine_limits.h probe_bandwidth.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "common/error.h"
#include "common/thread_count.h"
#include "machine_limits.h"  // tools/ds4-bench

namespace {

int64_t parse_int(const char* flag, const char* v, int64_t lo) {
    char* end = nullptr;
    const long long x = std::strtoll(v, &end, 10);
    if (end == v || *end != '\0' || x < lo) ds4::fail("{} '{}': expected an integer >= {}", flag, v, lo);
    return x;
}

int run(int argc, char** argv) {
    int64_t mib = 1024, threads = 2, reps = 9;
    bool peak = false;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            std::printf("usage: membw_probe [--mib 1024] [--threads 2] [--reps 9] [--int8-peak]\n");
            return 0;
        }
        if (a == "--int8-peak") {
            peak = true;
            continue;
        }
        if (i + 1 >= argc) ds4::fail("{}: missing value (see --help)", a);
        const char* v = argv[++i];
        if (a == "--mib") mib = parse_int("--mib", v, 1);
        else if (a == "--threads") threads = ds4::resolve_threads(parse_int("--threads", v, 1));
        else if (a == "--reps") reps = parse_int("--reps", v, 1);
        else ds4::fail("unknown option {} (see --help)", a);
    }
    const ds4::bench::Bandwidth bw = ds4::bench::probe_bandwidth(mib, int(threads), reps);
    std::printf("membw_probe: %lld MiB, %lld threads, %s loads, %lld reps: median %.2f GB/s "
                "(min %.2f, max %.2f; %s; plain loads %.2f, with prefetch %.2f)\n",
                static_cast<long long>(mib), static_cast<long long>(threads), bw.isa,
                static_cast<long long>(reps), bw.gbps, bw.min, bw.max,
                bw.prefetch ? "with software prefetch" : "plain loads", bw.plain, bw.ahead);
    if (peak) {
        const ds4::bench::Int8Peak p = ds4::bench::probe_int8_peak(int(threads));
        std::printf("%s\nint8_peak_gops %.0f\n", p.how().c_str(), p.gops);
    }
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
