// An allocator for large, long-lived scratch buffers (the forward pass's per-chunk
// activations): allocations of 2 MiB and more are 2 MiB-aligned and advised for transparent
// huge pages (MADV_HUGEPAGE; Linux "madvise" THP mode, the common default, gives malloc'd
// memory 4 KiB pages otherwise). Measured on the 4-layer Flash file: the first 512-token
// prefill of a process spends a quarter of its time faulting in and walking 4 KiB pages of
// ~500 MB of fresh buffers. Smaller allocations go to operator new as usual.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>
#include <vector>

namespace ds4 {

template <class T>
struct HugePageAllocator {
    using value_type = T;
    static constexpr size_t kHuge = size_t(2) << 20;

    HugePageAllocator() = default;
    template <class U>
    HugePageAllocator(const HugePageAllocator<U>&) {}

    T* allocate(size_t n) {
        const size_t bytes = n * sizeof(T);
        if (bytes < kHuge) return static_cast<T*>(::operator new(bytes));
        const size_t rounded = (bytes + kHuge - 1) / kHuge * kHuge;
        void* p = std::aligned_alloc(kHuge, rounded);
        if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
        madvise(p, rounded, MADV_HUGEPAGE);  // advice only: fine if THP is off
#endif
        return static_cast<T*>(p);
    }
    void deallocate(T* p, size_t n) {
        if (n * sizeof(T) < kHuge) ::operator delete(p);
        else std::free(p);
    }
    template <class U>
    bool operator==(const HugePageAllocator<U>&) const { return true; }
};

// A growable scratch buffer on huge pages.
template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace ds4
