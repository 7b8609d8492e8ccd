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
#include <utility>
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

// HugePageAllocator whose resize() leaves new elements of a trivial type uninitialized: the
// pages of a large buffer (fresh from the kernel) are touched only when written, so reserving
// e.g. a long context's caches costs address space, not memory.
template <class T>
struct UntouchedAllocator : HugePageAllocator<T> {
    template <class U>
    struct rebind {
        using other = UntouchedAllocator<U>;
    };
    UntouchedAllocator() = default;
    template <class U>
    UntouchedAllocator(const UntouchedAllocator<U>&) {}
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;  // default-initialization: no write for trivial U
    }
    template <class U, class... Args>
    void construct(U* p, Args&&... args) {
        ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
    }
};
template <class T>
using UntouchedVector = std::vector<T, UntouchedAllocator<T>>;

}  // namespace ds4
