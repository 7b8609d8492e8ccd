// SSD streaming of routed experts (docs/SSD_STREAMING.md): an ExpertSource with a fixed number
// of slots, each holding one (layer, expert)'s gate, up and down bytes exactly as the file
// stores them, so the kernels run on them unchanged. prepare() reads the missing experts of a
// layer with pread, in parallel over a small I/O thread pool (optionally with O_DIRECT), into
// slots chosen by SlotPolicy; the file mapping is never used for experts.
//
//   auto m = model::open(path, {.threads = 2, .stream_experts = true});
//   auto cache = std::make_shared<streaming::ExpertCache>(m->expert_layout(), {.slots = 64});
//   m->set_expert_source(cache);
//
// Lookahead (decode): the model forecasts the next layer's experts (hint()); the missing ones
// are read while the current layer computes, and the next prepare() waits for them. Forecasts
// that are mostly wrong would only cost reads, so each layer's are scored and ignored below
// kMinHintAccuracy.
//
// Read-ahead (prefill): when a prepare() announces at least 2 x n_expert routes (a prompt chunk,
// not a decode step) and the cache holds two layers' experts, the next layer's experts that are not
// cached are read in the background while this layer and the next layer's attention compute;
// the next prepare() waits for them. The results do not depend on it (only where the bytes are).
//
// A read that fails (the file shrank, an I/O error) throws ds4::Error naming the file, the
// layer and the expert; the slot is left free.
#pragma once

#include <atomic>
#include <condition_variable>
#include <exception>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "model/expert_source.h"
#include "streaming/profile.h"
#include "streaming/slot_policy.h"

namespace ds4::streaming {

struct CacheOptions {
    int64_t slots = 0;        // >= 1
    int io_threads = 4;       // parallel reads of one layer's misses (>= 1)
    bool direct = false;      // O_DIRECT reads (bypass the page cache); buffered if refused
    bool read_ahead = true;   // prefill reads the next layer's experts in the background
    bool lookahead = true;    // decode reads the experts the model forecasts for the next layer
};

struct CacheStats {
    uint64_t hits = 0, misses = 0, evictions = 0;  // of the experts prepare() was asked for
    uint64_t read_ahead = 0;      // experts read before they were asked for (then hits)
    uint64_t hinted = 0;          // of those, read on a decode forecast (hint)
    uint64_t hint_scheduled = 0;  // forecast experts set to be read (the unasked ones whose reads
                                  // had not started when prepare() came are skipped)
    uint64_t hint_used = 0;       // forecast reads the next prepare() asked for
    uint64_t bytes_read = 0;      // all reads: misses, read-ahead, preload
    double read_seconds = 0;      // wall time of the reads (overlapping compute for read-ahead)
    double wait_seconds = 0;      // wall time prepare() waited for reads
    int64_t max_occupied = 0;     // most slots ever holding an expert (<= slots)
    uint64_t prepares = 0;
    double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
};

// Runs tasks on a few threads that sleep when idle (reads wait on the disk, not the CPU).
class IoPool {
public:
    explicit IoPool(int threads);
    ~IoPool();
    // Runs fn(0..n-1) over the pool and the calling thread; returns when all are done.
    void run(int64_t n, const std::function<void(int64_t)>& fn);

private:
    void worker();
    std::vector<std::thread> threads_;
    std::mutex mu_;
    std::condition_variable cv_, done_cv_;
    const std::function<void(int64_t)>* fn_ = nullptr;
    int64_t n_ = 0, next_ = 0, running_ = 0;
    uint64_t generation_ = 0;
    bool stop_ = false;
};

class ExpertCache final : public model::ExpertSource {
public:
    ExpertCache(model::ExpertFileLayout layout, const CacheOptions& opt);
    ~ExpertCache() override;

    // model::ExpertSource
    void prepare(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows) override;
    model::ExpertWeights expert(uint32_t layer, int32_t e) const override;
    void release(uint32_t layer) override;
    size_t capacity() const override { return size_t(policy_.slots()); }
    bool wants_hints() const override { return lookahead_enabled_; }
    // Reads the forecast experts that are not cached in the background (held until the next
    // prepare(), which waits for them), when there is room beside the pinned experts, no
    // read-ahead is running, and the layer's recent forecasts were good enough (a running
    // share of forecast experts the next prepare() asked for, at least kMinHintAccuracy;
    // below it the forecasts are still scored, not read, so a layer can come back).
    void hint(uint32_t layer, std::span<const int32_t> experts) override;
    static constexpr float kMinHintAccuracy = 0.25f;

    // Reads experts into free slots, the first of the list first, at most the free ones, without
    // counting them as routes (startup preload from a profile); each starts with its `rate` as
    // hotness. Returns how many were loaded.
    int64_t preload(std::span<const HotExpert> experts);

    const CacheStats& stats() const { return stats_; }
    int64_t slots() const { return policy_.slots(); }
    uint64_t slot_bytes() const { return slot_stride_; }
    // The largest gate+up+down of one expert in the file (what a slot must hold).
    uint64_t expert_bytes() const { return expert_bytes_; }
    bool direct() const { return fd_direct_ >= 0; }
    const model::ExpertFileLayout& layout() const { return layout_; }

private:
    // Reads part 0/1/2 (gate/up/down) of (layer, e) into its region of `slot`; throws on error.
    void read_part(int64_t slot, uint32_t layer, int32_t e, size_t part);
    void fill(uint32_t layer, const std::vector<SlotPolicy::Miss>& misses);
    // Reads misses[i] into their slots over the I/O pool; errors[i] is set per failed read.
    // With `skip`: a part whose skip[i] is set before its read starts is not read, and
    // skipped[i] says the expert is incomplete.
    double read_all(uint32_t layer, const std::vector<SlotPolicy::Miss>& misses,
                    std::vector<std::exception_ptr>& errors, const std::atomic<bool>* skip = nullptr,
                    std::vector<uint8_t>* skipped = nullptr);
    // A background read for `layer` is running: its experts that `experts` (this prepare())
    // does not ask for are not read if their reads have not started (a wrong forecast, an
    // unused expert of a prompt's next layer), so prepare() waits only for useful bytes.
    void skip_unasked(uint32_t layer, std::span<const int32_t> experts);
    void start_read_ahead(uint32_t layer);
    // Reads `misses` (already admitted as held) of `layer` on a background thread.
    void start_background_read(uint32_t layer);
    // Scores the pending forecast for `layer` against what prepare() asked for.
    void score_hint(uint32_t layer, std::span<const int32_t> experts);
    void finish_read_ahead();  // waits, accounts, frees the slots of failed reads

    model::ExpertFileLayout layout_;
    SlotPolicy policy_;
    uint64_t expert_bytes_ = 0, slot_stride_ = 0;
    uint8_t* slots_mem_ = nullptr;
    size_t slots_mem_bytes_ = 0;
    int fd_ = -1, fd_direct_ = -1;
    std::unique_ptr<IoPool> io_;
    std::vector<int64_t> slot_of_;                 // scratch
    std::vector<SlotPolicy::Miss> misses_;         // scratch
    CacheStats stats_;
    bool read_ahead_enabled_ = true;
    bool lookahead_enabled_ = true;
    struct Forecast {
        bool pending = false;
        uint32_t layer = 0;
        std::vector<int32_t> experts;       // forecast, ascending
        std::vector<int32_t> read;          // the ones read for it (misses at hint time)
    } forecast_;
    std::vector<float> hint_accuracy_;      // per layer, running; starts at 1
    struct ReadAhead {
        bool active = false;
        uint32_t layer = 0;
        std::vector<SlotPolicy::Miss> misses;
        std::vector<std::exception_ptr> errors;
        std::unique_ptr<std::atomic<bool>[]> skip;  // per miss, set by skip_unasked()
        std::vector<uint8_t> skipped;                // per miss: not (wholly) read
        bool forecast = false;                       // started by hint()
        double seconds = 0;
        std::thread thread;
    } ahead_;
};

// "14.25 GiB" / "512.0 MiB": the byte counts streaming prints.
std::string human_bytes(uint64_t bytes);

}  // namespace ds4::streaming
