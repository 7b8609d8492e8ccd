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
    scale_.assign(n_layer, 1.0f);
    by_hot_.resize(n_layer);
    routes_.assign(n_layer, 0);
    free_.reserve(size_t(slots));
    for (int64_t s = slots - 1; s >= 0; --s) free_.push_back(s);
}

int64_t SlotPolicy::victim() const {
    // The coldest unpinned slot of each layer, then the coldest of those (ties: lower slot).
    int64_t best = -1;
    float best_hot = 0.0f;
    for (uint32_t l = 0; l < n_layer_; ++l) {
        for (const auto& [h, s] : by_hot_[l]) {
            if (pinned_[size_t(s)]) continue;
            const float actual = h * scale_[l];
            if (best < 0 || actual < best_hot || (actual == best_hot && s < best)) {
                best = s;
                best_hot = actual;
            }
            break;
        }
    }
    return best;
}

void SlotPolicy::occupy(int64_t slot, int64_t key) {
    key_[size_t(slot)] = key;
    index_[size_t(key)] = slot;
    by_hot_[size_t(key / n_expert_)].emplace(hot_[size_t(key)], slot);
}

void SlotPolicy::vacate(int64_t slot) {
    const int64_t key = key_[size_t(slot)];
    by_hot_[size_t(key / n_expert_)].erase({hot_[size_t(key)], slot});
    index_[size_t(key)] = -1;
    key_[size_t(slot)] = -1;
}

void SlotPolicy::add_hotness(uint32_t layer, int32_t expert, float rows) {
    const size_t key = size_t(layer) * size_t(n_expert_) + size_t(expert);
    const int64_t slot = index_[key];
    if (slot >= 0) by_hot_[layer].erase({hot_[key], slot});
    hot_[key] += rows / scale_[layer];
    if (slot >= 0) by_hot_[layer].emplace(hot_[key], slot);
}

void SlotPolicy::admit(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows,
                       std::vector<int64_t>& slot_of, std::vector<Miss>& misses) {
    if (layer >= n_layer_) fail("expert cache: layer {} of {}", layer, n_layer_);
    if (int64_t(experts.size()) > slots() - pinned())
        fail("expert cache: {} experts of layer {} asked for at once, but only {} of {} slots are "
             "not in use", experts.size(), layer, slots() - pinned(), slots());
    for (int32_t e : experts)
        if (e < 0 || e >= n_expert_) fail("expert cache: layer {} expert {} of {}", layer, e, n_expert_);
    // The layer's clock: every kDecayTokens tokens its hotness halves (before this call's rows
    // count, so they weigh fully).
    const int64_t period = kDecayTokens * n_expert_used_;
    int64_t added = 0;
    for (size_t i = 0; i < experts.size(); ++i) added += i < rows.size() ? rows[i] : 1;
    const int64_t before = routes_[layer] / period;
    routes_[layer] += added;
    const int64_t steps = routes_[layer] / period - before;
    if (steps > 0) {
        scale_[layer] = steps >= 200 ? 0.0f : std::ldexp(scale_[layer], -int(steps));
        if (scale_[layer] < 0x1p-64f) {
            // Fold the scale into the stored values (the order within the layer stays).
            std::set<std::pair<float, int64_t>> rebuilt;
            for (int64_t e = 0; e < n_expert_; ++e) {
                float& h = hot_[size_t(layer) * size_t(n_expert_) + size_t(e)];
                h *= scale_[layer];
                const int64_t s = index_[size_t(layer) * size_t(n_expert_) + size_t(e)];
                if (s >= 0) rebuilt.emplace(h, s);
            }
            by_hot_[layer] = std::move(rebuilt);
            scale_[layer] = 1.0f;
        }
    }
    for (size_t i = 0; i < experts.size(); ++i)
        add_hotness(layer, experts[i], float(i < rows.size() ? rows[i] : 1));
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
            vacate(m.slot);
            m.evicted = true;
        }
        occupy(m.slot, int64_t(layer) * n_expert_ + experts[i]);
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
    if (key_[size_t(slot)] < 0) return;
    vacate(slot);
    free_.push_back(slot);
    --occupied_;
}

}  // namespace ds4::streaming
