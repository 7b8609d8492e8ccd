#include "streaming/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file_io.h"
#include "streaming/slot_policy.h"

namespace ds4::streaming {

ProfilingSource::ProfilingSource(std::shared_ptr<model::ExpertSource> inner, const model::ExpertFileLayout& layout,
                                 size_t max_events)
    : inner_(std::move(inner)),
      path_(layout.path),
      n_layer_(int64_t(layout.layers.size())),
      n_expert_(layout.n_expert),
      n_expert_used_(layout.n_expert_used),
      max_events_(max_events) {
    for (const auto& L : layout.layers)
        if (L.held) expert_bytes_ = std::max(expert_bytes_, L.expert_bytes());
    counts_.assign(size_t(n_layer_ * n_expert_), 0);
}

void ProfilingSource::prepare(uint32_t layer, std::span<const int32_t> experts, std::span<const int32_t> rows) {
    if (layer < uint32_t(n_layer_))
        for (size_t i = 0; i < experts.size(); ++i)
            if (experts[i] >= 0 && experts[i] < n_expert_)
                counts_[size_t(layer) * size_t(n_expert_) + size_t(experts[i])] += uint64_t(i < rows.size() ? rows[i] : 1);
    if (events_.size() < max_events_) {
        events_.push_back({layer, uint32_t(experts_.size()), uint32_t(experts.size())});
        experts_.insert(experts_.end(), experts.begin(), experts.end());
        for (size_t i = 0; i < experts.size(); ++i) rows_.push_back(i < rows.size() ? rows[i] : 1);
    } else {
        truncated_ = true;
    }
    inner_->prepare(layer, experts, rows);
}

SimulatedCache ProfilingSource::simulate(int64_t slots) const {
    SimulatedCache r;
    r.slots = slots;
    if (slots < 1) return r;
    SlotPolicy p(slots, uint32_t(n_layer_), n_expert_, n_expert_used_);
    std::vector<int64_t> slot_of;
    std::vector<SlotPolicy::Miss> misses;
    for (const Event& ev : events_) {
        for (uint32_t g = 0; g < ev.count; g += uint32_t(std::min<int64_t>(slots, ev.count))) {
            const uint32_t n = uint32_t(std::min<int64_t>(slots, ev.count - g));
            misses.clear();
            p.admit(ev.layer, std::span<const int32_t>(experts_.data() + ev.first + g, n),
                    std::span<const int32_t>(rows_.data() + ev.first + g, n), slot_of, misses);
            r.misses += misses.size();
            r.hits += n - misses.size();
            p.unpin_all();
        }
    }
    return r;
}

std::string ProfilingSource::json(int64_t extra_slots) const {
    nlohmann::ordered_json j;
    j["format"] = "ds4-expert-profile";
    j["version"] = 1;
    j["model"] = path_;
    j["n_layer"] = n_layer_;
    j["n_expert"] = n_expert_;
    j["n_expert_used"] = n_expert_used_;
    j["expert_bytes"] = expert_bytes_;
    uint64_t routes = 0;
    auto layers = nlohmann::ordered_json::array();
    for (int64_t l = 0; l < n_layer_; ++l) {
        const uint64_t* c = &counts_[size_t(l * n_expert_)];
        uint64_t sum = 0;
        for (int64_t e = 0; e < n_expert_; ++e) sum += c[e];
        if (sum == 0) continue;
        routes = std::max(routes, sum);
        int64_t distinct = 0;
        for (int64_t e = 0; e < n_expert_; ++e) distinct += c[e] ? 1 : 0;
        nlohmann::ordered_json L;
        L["layer"] = l;
        L["routes"] = sum;
        L["distinct"] = distinct;
        L["counts"] = std::vector<uint64_t>(c, c + n_expert_);
        layers.push_back(std::move(L));
    }
    j["tokens"] = n_expert_used_ ? routes / uint64_t(n_expert_used_) : 0;
    j["layers"] = std::move(layers);
    // Slot counts: fractions of all experts the run's layers hold, at least one token's worth.
    int64_t held = 0;
    for (int64_t l = 0; l < n_layer_; ++l)
        for (int64_t e = 0; e < n_expert_; ++e)
            if (counts_[size_t(l * n_expert_ + e)]) {
                ++held;
                break;
            }
    const int64_t all = held * n_expert_;
    std::vector<int64_t> sizes;
    for (int64_t div : {32, 16, 8, 4, 2, 1})
        if (all / div >= n_expert_used_) sizes.push_back(all / div);
    if (extra_slots > 0) sizes.push_back(extra_slots);
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    auto sim = nlohmann::ordered_json::array();
    for (int64_t s : sizes) {
        const SimulatedCache r = simulate(s);
        nlohmann::ordered_json x;
        x["slots"] = s;
        x["bytes"] = uint64_t(s) * expert_bytes_;
        x["hits"] = r.hits;
        x["misses"] = r.misses;
        x["hit_rate"] = r.hit_rate();
        sim.push_back(std::move(x));
    }
    nlohmann::ordered_json s;
    s["policy"] = fmt::format("free slot first, else lowest route hotness (halved every {} tokens), "
                              "current layer's experts protected", SlotPolicy::kDecayTokens);
    s["requests"] = events_.size();
    s["truncated"] = truncated_;
    s["results"] = std::move(sim);
    j["simulation"] = std::move(s);
    return j.dump(1) + "\n";
}

void ProfilingSource::write(const std::string& path, int64_t extra_slots) const {
    const std::string text = json(extra_slots);
    try {
        write_file(path, text);
    } catch (const Error& e) {
        fail("--expert-profile {}", e.what());
    }
}

namespace {

constexpr uint64_t kMaxProfileBytes = 256ull << 20;
constexpr uint64_t kMaxProfileCount = 1ull << 53;  // exact in a double; far beyond any real run

// A count of a profile: an integer in [0, max]. A negative, fractional, non-finite (1e999
// parses as infinity) or absurd value is refused, naming it.
uint64_t profile_count(const nlohmann::json& v, uint64_t max, const std::string& path, const char* what) {
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0))
        fail("{}: not an expert profile ({} {} is not a whole number >= 0)", path, what, v.dump());
    const uint64_t n = v.get<uint64_t>();
    if (n > max) fail("{}: not an expert profile ({} {} is more than {})", path, what, n, max);
    return n;
}

}  // namespace

std::vector<HotExpert> hottest_experts(const std::string& path, int64_t n_layer, int64_t n_expert, int64_t n) {
    // A regular file of bounded size: /dev/zero once grew the process by 9 GB in 20 s, and a
    // FIFO blocked the start.
    std::string text;
    try {
        text = read_regular_file(path, kMaxProfileBytes);
    } catch (const Error& e) {
        fail("cannot read the expert profile {}", e.what());
    }
    nlohmann::json j;
    try {
        j = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
        fail("{}: not an expert profile (JSON: {})", path, e.what());
    }
    std::vector<std::tuple<uint64_t, uint32_t, int32_t>> all;
    uint64_t tokens = 0;
    try {
        if (j.value("format", "") != "ds4-expert-profile")
            fail("{}: not an expert profile (format is not \"ds4-expert-profile\")", path);
        if (j.at("n_layer").get<int64_t>() != n_layer || j.at("n_expert").get<int64_t>() != n_expert)
            fail("{}: a profile of a model with {} layers x {} experts, this one has {} x {}", path,
                 j.at("n_layer").get<int64_t>(), j.at("n_expert").get<int64_t>(), n_layer, n_expert);
        tokens = j.contains("tokens") ? profile_count(j.at("tokens"), kMaxProfileCount, path, "tokens") : 0;
        const uint64_t cap = tokens ? std::min(kMaxProfileCount, tokens * uint64_t(std::max<int64_t>(n_expert, 1)))
                                    : kMaxProfileCount;
        for (const auto& L : j.at("layers")) {
            const int64_t l = L.at("layer").get<int64_t>();
            const auto& c = L.at("counts");
            if (l < 0 || l >= n_layer || int64_t(c.size()) != n_expert)
                fail("{}: layer entry {} does not fit the model", path, l);
            for (int64_t e = 0; e < n_expert; ++e) {
                // Far more than `tokens` routes to one expert cannot come from one run.
                const uint64_t v = profile_count(c[size_t(e)], cap, path, "count");
                if (v) all.emplace_back(v, uint32_t(l), int32_t(e));
            }
        }
    } catch (const nlohmann::json::exception& e) {
        fail("{}: not an expert profile ({})", path, e.what());
    }
    std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
        if (std::get<0>(a) != std::get<0>(b)) return std::get<0>(a) > std::get<0>(b);
        return std::make_pair(std::get<1>(a), std::get<2>(a)) < std::make_pair(std::get<1>(b), std::get<2>(b));
    });
    if (n >= 0 && int64_t(all.size()) > n) all.resize(size_t(n));
    std::vector<HotExpert> out;
    out.reserve(all.size());
    const double per = tokens ? double(SlotPolicy::kDecayTokens) / double(tokens) : 1.0;
    for (const auto& [c, l, e] : all) out.push_back({l, e, float(double(c) * per)});
    return out;
}

}  // namespace ds4::streaming
