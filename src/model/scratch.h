// Scratch floats for the sublayers of a chunk (internal to src/model).
//
// The attention and MoE sublayers (and the hc_pre at the start of each) never run at the same
// time, so they take their buffers from one arena per calling thread, rewound at the start of
// every sublayer: the chunk's scratch is the larger sublayer's, not the sum of both (at 2048
// tokens of the Flash shape, ~0.6 GB instead of ~1.1 GB). Blocks are reserved on huge pages
// and kept; pages are touched only when first used, and after the first chunk of a size nothing
// is allocated or faulted.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/huge_pages.h"

namespace ds4::model {

class ScratchArena {
public:
    // Starts handing out from the first block again: earlier buffers are dead.
    void reset() {
        block_ = 0;
        used_ = 0;
    }
    // n floats, 64-byte aligned, uninitialized (stale data from earlier calls), valid until
    // the next reset().
    float* take(int64_t n) {
        const size_t want = (size_t(std::max<int64_t>(n, 1)) + 15) / 16 * 16;
        for (; block_ < blocks_.size(); ++block_, used_ = 0)
            if (used_ + want <= blocks_[block_].size) return take_from(want);
        blocks_.push_back(Block(std::max(want, kMinBlock)));
        used_ = 0;
        return take_from(want);
    }

private:
    // Reserved address space: only the pages used are ever touched.
    static constexpr size_t kMinBlock = size_t(256) << 20;  // floats (1 GiB)

    struct Block {
        explicit Block(size_t n) : size(n), data(HugePageAllocator<float>().allocate(n)) {}
        Block(Block&& o) noexcept : size(o.size), data(o.data) { o.data = nullptr; }
        Block& operator=(Block&&) = delete;
        ~Block() {
            if (data) HugePageAllocator<float>().deallocate(data, size);
        }
        size_t size;
        float* data;
    };

    float* take_from(size_t want) {
        float* p = blocks_[block_].data + used_;
        used_ += want;
        return p;
    }

    std::vector<Block> blocks_;
    size_t block_ = 0, used_ = 0;
};

// The calling thread's arena (workers never take from it).
inline ScratchArena& sublayer_scratch() {
    thread_local ScratchArena arena;
    return arena;
}

}  // namespace ds4::model
