#include "streaming/expert_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <exception>

#include "common/error.h"

namespace ds4::streaming {
namespace {

constexpr uint64_t kBlock = 4096;  // O_DIRECT alignment of offsets, lengths and buffers

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Bytes a part's region in a slot takes: its length, plus room to start at the file offset's
// block boundary and end at a block boundary (O_DIRECT), keeping the file's alignment.
uint64_t region_bytes(uint64_t len) { return round_up(len, kBlock) + 2 * kBlock; }

}  // namespace

std::string human_bytes(uint64_t b) {
    if (b >= (uint64_t(1) << 30)) return fmt::format("{:.2f} GiB", double(b) / double(uint64_t(1) << 30));
    if (b >= (uint64_t(1) << 20)) return fmt::format("{:.2f} MiB", double(b) / double(uint64_t(1) << 20));
    if (b >= 1024) return fmt::format("{:.1f} KiB", double(b) / 1024.0);
    return fmt::format("{} B", b);
}

IoPool::IoPool(int threads) {
    for (int i = 1; i < threads; ++i) threads_.emplace_back([this] { worker(); });
}

IoPool::~IoPool() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
}

void IoPool::worker() {
    uint64_t seen = 0;
    std::unique_lock lock(mu_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || (generation_ != seen && next_ < n_); });
        if (stop_) return;
        seen = generation_;
        while (next_ < n_) {
            const int64_t i = next_++;
            ++running_;
            lock.unlock();
            (*fn_)(i);
            lock.lock();
            --running_;
        }
        if (running_ == 0) done_cv_.notify_all();
    }
}

void IoPool::run(int64_t n, const std::function<void(int64_t)>& fn) {
    std::unique_lock lock(mu_);
    fn_ = &fn;
    n_ = n;
    next_ = 0;
    ++generation_;
    if (n > 1) cv_.notify_all();
    while (next_ < n_) {  // the caller reads too
        const int64_t i = next_++;
        ++running_;
        lock.unlock();
        fn(i);
        lock.lock();
        --running_;
    }
    done_cv_.wait(lock, [&] { return running_ == 0; });
    fn_ = nullptr;
    n_ = 0;
}

ExpertCache::ExpertCache(model::ExpertFileLayout layout, const CacheOptions& opt)
    : layout_(std::move(layout)),
      policy_(opt.slots, uint32_t(layout_.layers.size()), layout_.n_expert, layout_.n_expert_used) {
    if (opt.io_threads < 1) fail("expert cache: {} I/O threads (at least 1)", opt.io_threads);
    for (const auto& L : layout_.layers) {
        if (!L.held) continue;
        expert_bytes_ = std::max(expert_bytes_, L.expert_bytes());
        uint64_t stride = 0;
        for (const auto& p : L.parts) stride += region_bytes(p.expert_bytes);
        slot_stride_ = std::max(slot_stride_, stride);
    }
    if (slot_stride_ == 0) fail("{}: the model holds no routed experts to stream", layout_.path);
    if (uint64_t(opt.slots) > (uint64_t(1) << 62) / slot_stride_)
        fail("expert cache: {} slots of {} bytes overflow", opt.slots, slot_stride_);
    fd_ = ::open(layout_.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd_ < 0) fail("{}: cannot open for expert streaming: {}", layout_.path, std::strerror(errno));
    if (opt.direct) {
        // Refused by some file systems (tmpfs): buffered reads then.
        fd_direct_ = ::open(layout_.path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
    }
    // Reserved, not touched: a slot's pages become resident when an expert is first read in.
    slots_mem_bytes_ = size_t(uint64_t(opt.slots) * slot_stride_);
    void* m = mmap(nullptr, slots_mem_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) {
        const int e = errno;
        ::close(fd_);
        if (fd_direct_ >= 0) ::close(fd_direct_);
        fail("expert cache: cannot reserve {} for {} slots: {}", human_bytes(slots_mem_bytes_), opt.slots,
             std::strerror(e));
    }
#ifdef MADV_HUGEPAGE
    madvise(m, slots_mem_bytes_, MADV_HUGEPAGE);  // advice only
#endif
    slots_mem_ = static_cast<uint8_t*>(m);
    io_ = std::make_unique<IoPool>(opt.io_threads);
    read_ahead_enabled_ = opt.read_ahead;
    lookahead_enabled_ = opt.lookahead;
    hint_accuracy_.assign(layout_.layers.size(), 1.0f);
}

ExpertCache::~ExpertCache() {
    if (ahead_.thread.joinable()) ahead_.thread.join();
    io_.reset();
    if (slots_mem_) munmap(slots_mem_, slots_mem_bytes_);
    if (fd_ >= 0) ::close(fd_);
    if (fd_direct_ >= 0) ::close(fd_direct_);
}

void ExpertCache::read_part(int64_t slot, uint32_t layer, int32_t e, size_t part) {
    const auto& L = layout_.layers[layer];
    uint8_t* base = slots_mem_ + uint64_t(slot) * slot_stride_;
    for (size_t k = 0; k < part; ++k) base += region_bytes(L.parts[k].expert_bytes);
    {
        const size_t k = part;
        const model::ExpertTensorFile& p = L.parts[k];
        const uint64_t off = p.offset + uint64_t(e) * p.expert_bytes, len = p.expert_bytes;
        const bool direct = fd_direct_ >= 0;
        // O_DIRECT: whole blocks from the block holding `off`; buffered: exactly the bytes.
        const uint64_t from = direct ? off / kBlock * kBlock : off;
        const uint64_t to = direct ? round_up(off + len, kBlock) : off + len;
        uint8_t* dst = base + (off % kBlock) - (off - from);
        uint64_t done = 0;
        while (from + done < off + len) {
            const ssize_t r = ::pread(direct ? fd_direct_ : fd_, dst + done, size_t(to - from - done), off_t(from + done));
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) {
                const int err = r < 0 ? errno : 0;
                fail("{}: layer {} expert {}: reading its {} ({} bytes at byte {}) failed at byte {}: {}",
                     layout_.path, layer, e, k == 0 ? "gate" : k == 1 ? "up" : "down", len, off, from + done,
                     err ? std::strerror(err) : "unexpected end of file (the file is shorter than its tensor table says)");
            }
            done += uint64_t(r);
        }
    }
}

double ExpertCache::read_all(uint32_t layer, const std::vector<SlotPolicy::Miss>& misses,
                             std::vector<std::exception_ptr>& errors, const std::atomic<bool>* skip,
                             std::vector<uint8_t>* skipped) {
    const auto t0 = std::chrono::steady_clock::now();
    // One task per part (gate, up, down) of each expert: more reads in flight for the disk's
    // queue when a decode step misses only one or two experts.
    std::vector<std::exception_ptr> part_errors(misses.size() * 3);
    std::vector<uint8_t> part_skipped(misses.size() * 3, 0);
    io_->run(int64_t(part_errors.size()), [&](int64_t i) {
        if (skip && skip[i / 3].load(std::memory_order_relaxed)) {
            part_skipped[size_t(i)] = 1;
            return;
        }
        try {
            read_part(misses[size_t(i / 3)].slot, layer, misses[size_t(i / 3)].expert, size_t(i % 3));
        } catch (...) {
            part_errors[size_t(i)] = std::current_exception();
        }
    });
    errors.assign(misses.size(), nullptr);
    for (size_t i = 0; i < part_errors.size(); ++i)
        if (part_errors[i] && !errors[i / 3]) errors[i / 3] = part_errors[i];
    if (skipped) {
        skipped->assign(misses.size(), 0);
        for (size_t i = 0; i < part_skipped.size(); ++i) (*skipped)[i / 3] |= part_skipped[i];
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

void ExpertCache::skip_unasked(uint32_t layer, std::span<const int32_t> experts) {
    if (!ahead_.active || ahead_.layer != layer) return;
    for (size_t i = 0; i < ahead_.misses.size(); ++i)
        if (!std::binary_search(experts.begin(), experts.end(), ahead_.misses[i].expert))
            ahead_.skip[i].store(true, std::memory_order_relaxed);
}

void ExpertCache::start_read_ahead(uint32_t layer) {
    std::vector<int32_t> missing;
    for (int32_t e = 0; e < int32_t(layout_.n_expert); ++e)
        if (policy_.find(layer, e) < 0) missing.push_back(e);
    if (missing.empty() || int64_t(missing.size()) > policy_.slots() - policy_.pinned()) return;
    ahead_.misses.clear();
    policy_.admit_held(layer, missing, ahead_.misses);
    ahead_.forecast = false;
    start_background_read(layer);
}

void ExpertCache::start_background_read(uint32_t layer) {
    ahead_.layer = layer;
    for (const auto& m : ahead_.misses) stats_.evictions += m.evicted ? 1 : 0;
    stats_.max_occupied = std::max(stats_.max_occupied, policy_.occupied());
    ahead_.active = true;
    ahead_.skip = std::make_unique<std::atomic<bool>[]>(ahead_.misses.size());
    for (size_t i = 0; i < ahead_.misses.size(); ++i) ahead_.skip[i].store(false);
    ahead_.thread = std::thread([this] {
        ahead_.seconds = read_all(ahead_.layer, ahead_.misses, ahead_.errors, ahead_.skip.get(), &ahead_.skipped);
    });
}

void ExpertCache::hint(uint32_t layer, std::span<const int32_t> experts) {
    if (!lookahead_enabled_ || ahead_.active || forecast_.pending) return;
    if (layer >= layout_.layers.size() || !layout_.layers[layer].held || experts.empty()) return;
    for (int32_t e : experts)
        if (e < 0 || e >= int32_t(layout_.n_expert)) return;
    forecast_.pending = true;
    forecast_.layer = layer;
    forecast_.experts.assign(experts.begin(), experts.end());
    forecast_.read.clear();
    if (hint_accuracy_[layer] < kMinHintAccuracy) return;  // scored, not read
    std::vector<int32_t> missing;
    for (int32_t e : experts)
        if (policy_.find(layer, e) < 0) missing.push_back(e);
    if (missing.empty() || int64_t(missing.size()) > policy_.slots() - policy_.pinned()) return;
    ahead_.misses.clear();
    policy_.admit_held(layer, missing, ahead_.misses);
    forecast_.read = missing;
    stats_.hint_scheduled += missing.size();
    ahead_.forecast = true;
    start_background_read(layer);
}

void ExpertCache::score_hint(uint32_t layer, std::span<const int32_t> experts) {
    if (!forecast_.pending) return;
    forecast_.pending = false;
    if (forecast_.layer != layer) return;  // the model went elsewhere (another call, a group)
    auto asked = [&](int32_t e) { return std::binary_search(experts.begin(), experts.end(), e); };
    int64_t right = 0;
    for (int32_t e : forecast_.experts) right += asked(e) ? 1 : 0;
    for (int32_t e : forecast_.read) stats_.hint_used += asked(e) ? 1 : 0;
    // A running share over the last ~8 forecasts of the layer.
    const float acc = float(right) / float(forecast_.experts.size());
    hint_accuracy_[layer] = 0.875f * hint_accuracy_[layer] + 0.125f * acc;
}

void ExpertCache::finish_read_ahead() {
    if (!ahead_.active) return;
    const auto t0 = std::chrono::steady_clock::now();
    ahead_.thread.join();
    ahead_.active = false;
    stats_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    stats_.read_seconds += ahead_.seconds;
    for (size_t i = 0; i < ahead_.misses.size(); ++i) {
        if (ahead_.errors[i] || ahead_.skipped[i]) {
            // Read again (and a failure reported) if it is ever asked for. A skipped expert's
            // parts that were read are not counted.
            policy_.drop(ahead_.misses[i].slot);
        } else {
            stats_.bytes_read += layout_.layers[ahead_.layer].expert_bytes();
            ++stats_.read_ahead;
            if (ahead_.forecast) ++stats_.hinted;
        }
    }
    policy_.unhold_all();
}

void ExpertCache::fill(uint32_t layer, const std::vector<SlotPolicy::Miss>& misses) {
    if (misses.empty()) return;
    std::vector<std::exception_ptr> errors;
    const double s = read_all(layer, misses, errors);
    stats_.read_seconds += s;
    stats_.wait_seconds += s;
    std::exception_ptr first;
    for (size_t i = 0; i < misses.size(); ++i) {
        if (errors[i]) {
            if (!first) first = errors[i];
            policy_.drop(misses[i].slot);  // holds no valid expert
        } else {
            stats_.bytes_read += layout_.layers[layer].expert_bytes();
        }
    }
    if (first) {
        policy_.unpin_all();
        std::rethrow_exception(first);
    }
}

void ExpertCache::prepare(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows) {
    if (layer >= layout_.layers.size() || !layout_.layers[layer].held)
        fail("expert cache: layer {} has no streamed experts", layer);
    skip_unasked(layer, experts);
    finish_read_ahead();
    score_hint(layer, experts);
    // One group is prepared at a time: whatever the last one pinned is done (also when an
    // error skipped its release()).
    policy_.unpin_all();
    misses_.clear();
    policy_.admit(layer, experts, rows, slot_of_, misses_);
    ++stats_.prepares;
    stats_.misses += misses_.size();
    stats_.hits += experts.size() - misses_.size();
    for (const auto& m : misses_) stats_.evictions += m.evicted ? 1 : 0;
    stats_.max_occupied = std::max(stats_.max_occupied, policy_.occupied());
    fill(layer, misses_);
    // A prompt chunk with room for two layers: read the next held layer's experts while this
    // one computes. At 2 x n_expert routes a layer uses ~86% of its experts (1 - e^-2 for
    // uniform routing), so little of the read is wasted.
    int64_t routes = 0;
    for (size_t i = 0; i < experts.size() && i < rows.size(); ++i) routes += rows[i];
    if (read_ahead_enabled_ && routes >= 2 * layout_.n_expert && policy_.slots() >= 2 * layout_.n_expert) {
        for (uint32_t next = layer + 1; next < layout_.layers.size(); ++next)
            if (layout_.layers[next].held) {
                start_read_ahead(next);
                break;
            }
    }
}

model::ExpertWeights ExpertCache::expert(uint32_t layer, int32_t e) const {
    if (layer >= layout_.layers.size() || !layout_.layers[layer].held || e < 0 || e >= layout_.n_expert)
        fail("expert cache: no layer {} expert {}", layer, e);
    const int64_t slot = policy_.find(layer, e);
    if (slot < 0) fail("expert cache: layer {} expert {} used without prepare()", layer, e);
    const auto& L = layout_.layers[layer];
    const uint8_t* base = slots_mem_ + uint64_t(slot) * slot_stride_;
    ops::Matrix m[3];
    for (size_t k = 0; k < 3; ++k) {
        const model::ExpertTensorFile& p = L.parts[k];
        const uint64_t off = p.offset + uint64_t(e) * p.expert_bytes;
        m[k] = ops::Matrix{p.type, p.rows_per_expert, p.cols, base + off % kBlock, p.row_bytes};
        base += region_bytes(p.expert_bytes);
    }
    return {m[0], m[1], m[2]};
}

void ExpertCache::release(uint32_t) { policy_.unpin_all(); }

int64_t ExpertCache::preload(std::span<const HotExpert> experts) {
    finish_read_ahead();
    // The first experts of the list that fit in the free slots, read layer by layer in
    // parallel like a prepare() (no rows: preloading is not a route).
    std::vector<std::vector<int32_t>> by_layer(layout_.layers.size());
    int64_t room = policy_.slots() - policy_.occupied(), loaded = 0;
    for (const auto& [layer, e, rate] : experts) {
        if (room == 0) break;
        if (layer >= layout_.layers.size() || !layout_.layers[layer].held || e < 0 || e >= layout_.n_expert) continue;
        if (policy_.find(layer, e) >= 0) continue;
        auto& l = by_layer[layer];
        if (std::find(l.begin(), l.end(), e) != l.end()) continue;
        l.push_back(e);
        policy_.seed(layer, e, rate);
        --room;
    }
    for (uint32_t layer = 0; layer < by_layer.size(); ++layer) {
        auto& l = by_layer[layer];
        if (l.empty()) continue;
        std::sort(l.begin(), l.end());
        const std::vector<int32_t> zero(l.size(), 0);
        misses_.clear();
        policy_.admit(layer, l, zero, slot_of_, misses_);
        fill(layer, misses_);
        policy_.unpin_all();
        loaded += int64_t(misses_.size());
    }
    stats_.max_occupied = std::max(stats_.max_occupied, policy_.occupied());
    return loaded;
}

}  // namespace ds4::streaming
