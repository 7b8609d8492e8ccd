// Software prefetch for the decode kernels (one activation), which stream each weight byte
// once from DRAM. The hardware prefetcher alone leaves a thread well below the bandwidth it
// can draw; asking for the lines a fixed distance ahead of the reader fixes that.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace ds4::quant {

// How far ahead of the reader (bytes). Q8_0 decode, 1 thread, 256 MiB (`matvec_bench`):
// 30 GB/s without, 36 at 4 KiB ahead, 42 at 8-13 KiB, 40 at 17-34 KiB (2 threads: 40-42 ->
// 49-51). A prefetch never faults, so kernels that know only their row may reach past it
// into the rows that follow, which a decode matvec reads next.
inline constexpr size_t kPrefetchAhead = 12 * 1024;

// One sequential read [begin, end), prefetched kPrefetchAhead ahead of the reader. Each line
// is asked for once, a few at a time as the reader advances: asking for a whole row at once
// (8 KiB of F16) made F16 slower (35 -> 29 GB/s).
class StreamAhead {
public:
    static constexpr size_t kAhead = kPrefetchAhead;
    // The read covers [begin, end); nothing outside it is prefetched.
    StreamAhead(const uint8_t* begin, const uint8_t* end) : next_(begin), end_(end) {}
    // The reader is at `at`: asks for every line up to kAhead bytes past it.
    void at(const void* at) {
        const uint8_t* p = static_cast<const uint8_t*>(at);
        const uint8_t* lim = size_t(end_ - p) > kAhead ? p + kAhead : end_;
        for (; next_ < lim; next_ += 64) _mm_prefetch(reinterpret_cast<const char*>(next_), _MM_HINT_T0);
    }

private:
    const uint8_t* next_;
    const uint8_t* end_;
};

}  // namespace ds4::quant
