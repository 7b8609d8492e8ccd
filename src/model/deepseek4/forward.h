// The forward pass's internals (private to src/model/deepseek4): the rows of a call as the
// layers see them, the model's workspace, and the two sublayers of a block. X is the HC state
// of the call's rows, [rows][hc][n_embd], updated in place.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "common/huge_pages.h"
#include "common/thread_pool.h"
#include "model/deepseek4/model.h"
#include "model/deepseek4/sequence.h"
#include "ops/hc.h"
#include "ops/matmul.h"

namespace ds4::deepseek4 {

// Scratch floats for the sublayers of a call.
//
// The attention and MoE sublayers (and the hc_pre at the start of each) never run at the same
// time, so they take their buffers from one arena, rewound at the start of every sublayer: the
// call's scratch is the larger sublayer's, not the sum of both (at 2048 tokens of the Flash
// shape, ~0.6 GB instead of ~1.1 GB). Blocks are reserved on huge pages and kept; pages are
// touched only when first used, and after the first call of a size nothing is allocated or
// faulted.
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

// Everything a call needs besides the weights and the sequences, owned by the Model and kept
// between calls (fresh allocations of this size come from the kernel as zeroed pages every
// time, which measured as ~15% of prefill).
struct Workspace {
    HugeVector<float> X;          // [rows][hc][n_embd] of eval()
    ScratchArena arena;           // the sublayers' floats
    QuantRows m_exp, m_sh;        // MoE down-projection inputs in their dot types
    ops::Activations v_exp, v_sh; // MoE gate/up inputs in their dot types
    ops::Activations head_in;     // output projection inputs
};

// The rows of a call: batch items in order, each item's tokens in position order.
struct Rows {
    struct Span {
        Sequence* seq;
        int64_t row0, n, p0;  // rows [row0, row0+n) at positions p0 .. p0+n-1
    };
    std::vector<Span> spans;      // one per batch item
    std::vector<int32_t> token;   // [rows]
    std::vector<int64_t> pos;     // [rows] absolute position
    std::vector<int32_t> span_of; // [rows] index into spans
    int64_t n = 0;

    explicit Rows(model::Batch b);
    bool qat(int64_t r) const { return spans[size_t(span_of[size_t(r)])].seq->options().qat; }
};

struct LayerContext {
    const ModelConfig& cfg;
    const Model& model;
    ThreadPool& pool;
    Workspace& ws;
    const Rows& rows;
};

void attention_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X);
void moe_sublayer(const LayerContext& ctx, const LayerWeights& w, float* X);

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

// hc_pre for every row (§3.2): the sublayer inputs y [n][n_embd] and the mixes that hc_post
// needs.
std::vector<ops::HcMix> hc_pre(const LayerContext& ctx, const ops::Matrix& fn, const float* scale,
                               const float* base, const float* X, int64_t n, float* y);

}  // namespace ds4::deepseek4
