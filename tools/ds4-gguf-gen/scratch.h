// What both generators (deepseek4 and glm-dsa) use to write tensors: one reusable scratch
// buffer and a parallel loop over rows.
#pragma once

#include <fmt/format.h>
#include <sys/mman.h>

#include <cstdint>
#include <functional>
#include <span>

#include "common/error.h"

namespace ds4 {
class ThreadPool;
}

namespace ds4::gen {

// Page-aligned scratch memory, backed by huge pages where the kernel allows. The generators
// size one for the largest tensor and reuse it: fresh allocations per tensor cost a page fault
// per 4 KiB (measured: ~20 s of system time for a 3.4 GiB file).
class Buffer {
public:
    explicit Buffer(uint64_t n) : size_(n) {
        if (n == 0) return;
        p_ = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p_ == MAP_FAILED) fail("cannot allocate {:.1f} MiB for a tensor", double(n) / (1 << 20));
        madvise(p_, n, MADV_HUGEPAGE);  // advisory; fine if unsupported
    }
    ~Buffer() {
        if (size_) munmap(p_, size_);
    }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
    std::span<uint8_t> span(uint64_t n) { return {static_cast<uint8_t*>(p_), size_t(n)}; }

private:
    void* p_ = nullptr;
    uint64_t size_;
};

// Runs fn over [0, rows) on the pool (inline when it is null), rethrowing the first exception
// on the caller's thread (a worker must not let one escape).
void for_rows(ThreadPool* pool, int64_t rows, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

}  // namespace ds4::gen
