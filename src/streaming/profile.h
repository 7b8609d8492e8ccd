// Expert locality profile (--expert-profile FILE; format in docs/SSD_STREAMING.md): how often
// each (layer, expert) was routed to, and a replay of the run's expert requests through the
// cache policy (SlotPolicy) at several slot counts, so that a budget can be chosen from one run.
// Works with resident experts as well as with the streaming cache: ProfilingSource wraps the
// model's source and records what prepare() announces.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "model/expert_source.h"

namespace ds4::streaming {

struct SimulatedCache {
    int64_t slots = 0;
    uint64_t hits = 0, misses = 0;
    double hit_rate() const { return hits + misses ? double(hits) / double(hits + misses) : 0.0; }
};

class ProfilingSource final : public model::ExpertSource {
public:
    // Records at most max_events prepare() calls for the simulation (counts are always kept).
    ProfilingSource(std::shared_ptr<model::ExpertSource> inner, const model::ExpertFileLayout& layout,
                    size_t max_events = size_t(1) << 20);

    void prepare(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows) override;
    model::ExpertWeights expert(uint32_t layer, int32_t e) const override { return inner_->expert(layer, e); }
    void release(uint32_t layer) override { inner_->release(layer); }
    size_t capacity() const override { return inner_->capacity(); }

    // Replays the recorded requests with `slots` slots (requests larger than the cache are
    // split into groups, as the model does).
    SimulatedCache simulate(int64_t slots) const;
    // The profile as JSON; `extra_slots` (e.g. the real cache's) joins the simulated counts.
    std::string json(int64_t extra_slots = 0) const;
    void write(const std::string& path, int64_t extra_slots = 0) const;

private:
    struct Event {
        uint32_t layer;
        uint32_t first, count;  // into experts_ / rows_
    };
    std::shared_ptr<model::ExpertSource> inner_;
    std::string path_;
    int64_t n_layer_, n_expert_, n_expert_used_;
    uint64_t expert_bytes_ = 0;
    std::vector<uint64_t> counts_;  // [layer][expert] rows routed
    std::vector<Event> events_;
    std::vector<int32_t> experts_, rows_;
    size_t max_events_;
    bool truncated_ = false;
};

// An expert of a profile and its route rate: routes per 16 tokens of the profiled run (the
// cache's hotness of an expert routed at that rate for a while is about twice that).
struct HotExpert {
    uint32_t layer = 0;
    int32_t expert = 0;
    float rate = 0;
};
// The experts of a profile file, most routed first (ties: lower layer, lower expert), at most
// `n` (n < 0: all that were routed). Throws ds4::Error naming the file when it is not a profile
// of a model with this many layers and experts.
std::vector<HotExpert> hottest_experts(const std::string& path, int64_t n_layer, int64_t n_expert, int64_t n);

}  // namespace ds4::streaming
