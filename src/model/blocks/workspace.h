// Scratch memory of a forward pass (family-neutral): the arena the sublayers take their floats
// from, rows converted to a dot type, and the model's Workspace kept between calls. Also the two
// small helpers every sublayer uses (grow, for_tokens).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/huge_pages.h"
#include "common/thread_pool.h"
#include "gguf/tensor_type.h"
#include "ops/matmul.h"
#include "quant/quant.h"

namespace ds4::blocks {

// Scratch floats for the sublayers of a call.
//
// The sublayers (and the steps at their start) never run at the same time, so they take their
// buffers from one arena, rewound at the start of every sublayer: the call's scratch is the
// largest sublayer's, not the sum (at 2048 tokens of the DeepSeek V4 Flash shape, ~0.6 GB
// instead of ~1.1 GB). Blocks are reserved on huge pages and kept; pages are touched only when
// first used, and after the first call of a size nothing is allocated or faulted.
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

// Rows of floats converted to a dot type, one buffer, addressed by row.
struct QuantRows {
    HugeVector<uint8_t> buf;
    size_t row_bytes = 0;
    void resize(int64_t rows, int64_t n, TensorType t) {
        row_bytes = ds4::row_bytes(t, n);
        if (buf.size() < row_bytes * size_t(rows)) buf.resize(row_bytes * size_t(rows));
    }
    void* row(int64_t r) { return buf.data() + size_t(r) * row_bytes; }
};

// The FFN's inputs in their dot types (blocks/routed_ffn.h, blocks/swiglu_ffn.h): gate/up
// inputs of the routed and the shared (or dense) matrices, and the down projections' inputs.
struct FfnBuffers {
    ops::Activations v_exp, v_sh;  // gate/up inputs: routed experts, shared expert / dense FFN
    QuantRows m_exp, m_sh;         // down inputs: per slot, per row
};

// Everything a call needs besides the weights and the sequences, owned by a Model and kept
// between calls (fresh allocations of this size come from the kernel as zeroed pages every
// time, which measured as ~15% of prefill).
struct Workspace {
    HugeVector<float> X;       // the hidden state of eval(): [rows][hidden_size]
    ScratchArena arena;        // the sublayers' floats
    FfnBuffers ffn;            // the FFN sublayer's converted inputs
    ops::Activations head_in;  // output projection inputs
};

// v.data() with at least n floats: buffers only grow (see Workspace) and sit on huge pages
// (common/huge_pages.h).
inline float* grow(HugeVector<float>& v, int64_t n) {
    if (v.size() < size_t(n)) v.resize(size_t(n));
    return v.data();
}

// fn(t) for every row t < n, split over the pool (per-row work that is independent).
template <class Fn>
void for_tokens(ThreadPool& pool, int64_t n, Fn&& fn) {
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
        for (int64_t t = b; t < e; ++t) fn(t);
    });
}

}  // namespace ds4::blocks
