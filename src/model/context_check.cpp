#include "model/context_check.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>

#include <fmt/format.h>

#include "common/error.h"

namespace ds4::model {
namespace {

// A number from the first line of `path`; -1 when absent or "max".
int64_t read_number(const char* path) {
    std::ifstream in(path);
    std::string s;
    if (!(in >> s) || s == "max") return -1;
    try {
        return std::stoll(s);
    } catch (const std::exception&) {
        return -1;
    }
}

int64_t meminfo_available() {
    std::ifstream in("/proc/meminfo");
    std::string key;
    int64_t kib = 0;
    std::string unit;
    while (in >> key >> kib >> unit)
        if (key == "MemAvailable:") return kib * 1024;
    return -1;
}

std::string gib(int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(int64_t(1) << 30));
    return buf;
}

}  // namespace

int64_t available_memory() {
    int64_t avail = meminfo_available();
    auto cap = [&](int64_t limit, int64_t used) {
        // cgroup v1 reports "no limit" as a huge number.
        if (limit <= 0 || used < 0 || limit >= (int64_t(1) << 60)) return;
        const int64_t left = std::max<int64_t>(0, limit - used);
        avail = avail < 0 ? left : std::min(avail, left);
    };
    cap(read_number("/sys/fs/cgroup/memory.max"), read_number("/sys/fs/cgroup/memory.current"));
    cap(read_number("/sys/fs/cgroup/memory/memory.limit_in_bytes"),
        read_number("/sys/fs/cgroup/memory/memory.usage_in_bytes"));
    return avail;
}

int64_t max_context_for_bytes(const Model& m, const SequenceOptions& opt, int64_t bytes) {
    int64_t lo = 0, hi = int64_t(1) << 40;  // the state grows with the context
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo + 1) / 2;
        SequenceOptions o = opt;
        o.ctx = mid;
        if (m.sequence_bytes(o) <= bytes) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

void check_memory(const Model& m, const SequenceOptions& opt, int64_t sequences, const char* flag) {
    const int64_t avail = available_memory();
    if (avail < 0) return;
    const int64_t need = m.sequence_bytes(opt);
    if (need <= avail / std::max<int64_t>(1, sequences)) return;
    const int64_t fits = max_context_for_bytes(m, opt, avail / std::max<int64_t>(1, sequences));
    fail("{} {}: {} of KV state{} but {} of memory is available; at most {} tokens fit{}", flag, opt.ctx,
         gib(need), sequences > 1 ? fmt::format(" per sequence, x {}", sequences) : std::string(),
         gib(avail), fits, sequences > 1 ? " per sequence" : "");
}

void check_trained_context(const Model& m, int64_t ctx, const char* flag) {
    const uint64_t trained = m.info().trained_ctx;
    if (trained > 0 && uint64_t(ctx) > trained)
        fail("{} {} is above the model's trained context of {} tokens (use at most {})", flag, ctx, trained,
             trained);
}

}  // namespace ds4::model
