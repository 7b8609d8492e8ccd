#include "streaming/slot_policy.h"

#include <cmath>

#include "common/error.h"

namespace ds4::streaming {

SlotPolicy::SlotPolicy(int64_t slots, uint32_t n_layer, int64_t n_expert, int64_t n_expert_used)
    : n_layer_(n_layer), n_expert_(n_expert), n_expert_used_(n_expert_used) {
    if (slots < 1) fail("expert cache: {} slots (at least 1)", slots);
    if (n_expert < 1 || n_expert_used < 1) fail("expert cache: {} experts, {} used", n_expert, n_expert_used);
    key_.assign(size_t(slots), -1);
    pinned_.assign(size_t(slots), 0);
    index_.assign(size_t(n_layer) * size_t(n_expert), -1);
    hot_.assign(index_.size(), 0.0f);
    routes_.assign(n_layer, 0);
    free_.reserve(size_t(slots));
    for (int64_t s = slots - 1; s >= 0; --s) free_.push_back(s);
}

int64_t SlotPolicy::victim() const {
    int64_t best = -1;
    float best_hot = 0.0f;
    for (int64_t s = 0; s < int64_t(key_.size()); ++s) {
        if (pinned_[size_t(s)] || key_[size_t(s)] < 0) continue;
        const float h = hot_[size_t(key_[size_t(s)])];
        if (best < 0 || h < best_hot) {
            best = s;
            best_hot = h;
        }
    }
    return best;
}

void SlotPolicy::admit(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows,
                       std::vector<int64_t>& slot_of, std::vector<Miss>& misses) {
    if (layer >= n_layer_) fail("expert cache: layer {} of {}", layer, n_layer_);
    if (int64_t(experts.size()) > slots() - pinned())
        fail("expert cache: {} experts of layer {} asked for at once, but only {} of {} slots are "
             "not in use", experts.size(), layer, slots() - pinned(), slots());
    // The layer's clock: every kDecayTokens tokens its hotness halves (before this call's rows
    // count, so they weigh fully).
    const int64_t period = kDecayTokens * n_expert_used_;
    int64_t added = 0;
    for (size_t i = 0; i < experts.size(); ++i) added += i < rows.size() ? rows[i] : 1;
    const int64_t before = routes_[layer] / period;
    routes_[layer] += added;
    const int64_t steps = routes_[layer] / period - before;
    float* hot = &hot_[size_t(layer) * size_t(n_expert_)];
    if (steps > 0) {
        const float f = steps >= 64 ? 0.0f : std::pow(kDecay, float(steps));
        for (int64_t e = 0; e < n_expert_; ++e) hot[e] *= f;
    }
    for (size_t i = 0; i < experts.size(); ++i) {
        const int32_t e = experts[i];
        if (e < 0 || e >= n_expert_) fail("expert cache: layer {} expert {} of {}", layer, e, n_expert_);
        hot[e] += float(i < rows.size() ? rows[i] : 1);
    }
    // Hits first, so that none of them is taken as a victim of a miss of this call.
    slot_of.assign(experts.size(), -1);
    for (size_t i = 0; i < experts.size(); ++i) {
        const int64_t s = find(layer, experts[i]);
        if (s < 0) continue;
        slot_of[i] = s;
        if (!pinned_[size_t(s)]) {
            pinned_[size_t(s)] = 1;
            pinned_list_.push_back(s);
        }
    }
    for (size_t i = 0; i < experts.size(); ++i) {
        if (slot_of[i] >= 0) continue;
        Miss m{experts[i], -1, false};
        if (!free_.empty()) {
            m.slot = free_.back();
            free_.pop_back();
            ++occupied_;
        } else {
            m.slot = victim();
            if (m.slot < 0) fail("expert cache: no slot to evict for layer {} expert {}", layer, experts[i]);
            index_[size_t(key_[size_t(m.slot)])] = -1;
            m.evicted = true;
        }
        const int64_t key = int64_t(layer) * n_expert_ + experts[i];
        key_[size_t(m.slot)] = key;
        index_[size_t(key)] = m.slot;
        pinned_[size_t(m.slot)] = 1;
        pinned_list_.push_back(m.slot);
        slot_of[i] = m.slot;
        misses.push_back(m);
    }
}

void SlotPolicy::unpin_all() {
    for (int64_t s : pinned_list_)
        if (pinned_[size_t(s)] == 1) pinned_[size_t(s)] = 0;
    pinned_list_.clear();
}

void SlotPolicy::admit_held(uint32_t layer, std::span<const int32_t> experts, std::vector<Miss>& misses) {
    std::vector<int64_t> slot_of;
    const std::vector<int32_t> zero(experts.size(), 0);
    admit(layer, experts, zero, slot_of, misses);
    // The admitted slots move from the request's pins to read-ahead holds.
    for (int64_t s : slot_of) pinned_[size_t(s)] = 2;
    held_list_.insert(held_list_.end(), slot_of.begin(), slot_of.end());
    std::erase_if(pinned_list_, [&](int64_t s) { return pinned_[size_t(s)] == 2; });
}

void SlotPolicy::unhold_all() {
    for (int64_t s : held_list_) pinned_[size_t(s)] = 0;
    held_list_.clear();
}

void SlotPolicy::drop(int64_t slot) {
    const int64_t key = key_[size_t(slot)];
    if (key < 0) return;
    index_[size_t(key)] = -1;
    key_[size_t(slot)] = -1;
    free_.push_back(slot);
    --occupied_;
}

}  // namespace ds4::streaming
