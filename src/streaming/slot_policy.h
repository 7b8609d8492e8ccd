// Which (layer, expert) each cache slot holds, and which one a miss evicts
// (docs/SSD_STREAMING.md, "Cache"). No I/O: the expert cache drives it with real reads, the
// expert profile replays a recorded run through it to simulate other slot counts.
//
// Victims: a free slot first; else the occupied slot with the lowest decayed route hotness.
// Hotness of (layer, expert) is the number of rows routed to it, halved every 16 tokens of its
// layer; ties go to the lower slot. Experts announced by the current prepare() (pinned until
// unpin_all()) and experts being read ahead (held until unhold_all()) are never evicted.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <utility>
#include <vector>

namespace ds4::streaming {

class SlotPolicy {
public:
    static constexpr int64_t kDecayTokens = 16;
    static constexpr float kDecay = 0.5f;

    // slots >= 1; n_expert_used >= 1 (rows per token, for the token clock).
    SlotPolicy(int64_t slots, uint32_t n_layer, int64_t n_expert, int64_t n_expert_used);

    struct Miss {
        int32_t expert = 0;
        int64_t slot = 0;
        bool evicted = false;  // the slot held another expert, now dropped
    };
    // Admits a layer's experts (distinct; rows[i] rows chose experts[i]): updates hotness, pins
    // them and gives each a slot (slot_of[i]); the ones not already held are appended to
    // `misses` (the caller fills their slots). Throws ds4::Error when more experts are asked
    // for than slots not pinned.
    void admit(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows,
               std::vector<int64_t>& slot_of, std::vector<Miss>& misses);
    void unpin_all();
    // Read-ahead: like admit() without routes, and the slots stay protected across
    // unpin_all() until unhold_all().
    void admit_held(uint32_t layer, std::span<const int32_t> experts, std::vector<Miss>& misses);
    void unhold_all();
    // The slot holding (layer, expert), or -1.
    int64_t find(uint32_t layer, int32_t expert) const {
        return index_[size_t(layer) * size_t(n_expert_) + size_t(expert)];
    }
    // Adds `value` to the hotness of (layer, expert) without advancing its layer's clock
    // (preloaded experts start as hot as their profile says).
    void seed(uint32_t layer, int32_t expert, float value) { add_hotness(layer, expert, value); }
    // Forgets a slot's content (its read failed).
    void drop(int64_t slot);

    int64_t slots() const { return int64_t(key_.size()); }
    int64_t occupied() const { return occupied_; }
    int64_t pinned() const { return int64_t(pinned_list_.size() + held_list_.size()); }
    float hotness(uint32_t layer, int32_t expert) const {
        return hot_[size_t(layer) * size_t(n_expert_) + size_t(expert)] * scale_[layer];
    }

private:
    // Victims in O(layers + pinned) instead of a scan of every slot (the profile replays a
    // whole run at several sizes): each layer keeps its held experts ordered by hotness. A
    // layer's decay multiplies all its hotness by the same power of two, which keeps that order,
    // so hotness is stored divided by the layer's running scale (exact: powers of two).
    int64_t victim() const;
    void occupy(int64_t slot, int64_t key);
    void vacate(int64_t slot);
    void add_hotness(uint32_t layer, int32_t expert, float rows);

    uint32_t n_layer_;
    int64_t n_expert_, n_expert_used_;
    std::vector<int64_t> key_;      // per slot: layer * n_expert + expert, or -1 (free)
    std::vector<uint8_t> pinned_;   // per slot: 1 pinned by the request, 2 held (read ahead)
    std::vector<int64_t> pinned_list_;
    std::vector<int64_t> held_list_;   // pinned_[s] == 2: read ahead
    std::vector<int64_t> index_;    // per (layer, expert): slot or -1
    std::vector<float> hot_;        // per (layer, expert), divided by scale_[layer]
    std::vector<float> scale_;      // per layer
    std::vector<std::set<std::pair<float, int64_t>>> by_hot_;  // per layer: (hot_, slot) held
    std::vector<int64_t> routes_;   // per layer: rows routed so far (the token clock * used)
    std::vector<int64_t> free_;     // free slots, the lowest last
    int64_t occupied_ = 0;
};

}  // namespace ds4::streaming
