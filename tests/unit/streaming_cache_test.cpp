// The SSD streaming pieces that need no model (src/streaming): the budget syntax and its
// resolution against memory, the cache policy's choice of victims (free slots first, then the
// lowest decayed route hotness, never an expert of the current request), and the expert cache
// serving exactly the file's bytes of each expert (buffered and O_DIRECT, with read-ahead).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/error.h"
#include "streaming/budget.h"
#include "streaming/expert_cache.h"
#include "support/tool_run.h"
#include "streaming/slot_policy.h"

namespace ds4::streaming {
namespace {

std::string error_of(auto&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(StreamingBudget, Syntax) {
    EXPECT_EQ(parse_budget("64").kind, BudgetRequest::Kind::Slots);
    EXPECT_EQ(parse_budget("64").value, 64);
    EXPECT_EQ(parse_budget("auto").kind, BudgetRequest::Kind::Auto);
    EXPECT_EQ(parse_budget("").kind, BudgetRequest::Kind::Auto);
    EXPECT_EQ(parse_budget("12GB").value, int64_t(12) << 30);
    EXPECT_EQ(parse_budget("12gib").value, int64_t(12) << 30);
    EXPECT_EQ(parse_budget("12G").kind, BudgetRequest::Kind::Bytes);
    EXPECT_EQ(parse_budget("1.5GB").value, int64_t(3) << 29);
    EXPECT_EQ(parse_budget("512MB").value, int64_t(512) << 20);
    EXPECT_EQ(parse_budget("512MiB").value, int64_t(512) << 20);
    for (const char* bad : {"-1", "1.5", "12TB", "GB", "1..2GB", "12 GB", "x", "1e3"})
        EXPECT_NE(budget_error(bad).find("expected a number of experts"), std::string::npos) << bad;
    EXPECT_NE(budget_error("0").find("at least one expert"), std::string::npos);
    EXPECT_NE(budget_error("0GB").find("at least one expert"), std::string::npos);
    EXPECT_NE(budget_error("99999999999999999").find("too many"), std::string::npos);
    EXPECT_EQ(budget_error("7"), "");
}

// 4 layers of 16 experts, 2 used; slots of 1 MiB.
BudgetInputs inputs(int64_t available, int64_t reserved = 0) {
    return {.slot_bytes = 1 << 20, .expert_bytes = 1000000, .n_expert = 16, .n_expert_used = 2, .n_layers = 4,
            .available = available, .reserved = reserved};
}

TEST(StreamingBudget, Resolution) {
    const int64_t GiB = int64_t(1) << 30, MiB = int64_t(1) << 20;
    // Exact slot counts and bytes in whole slots.
    EXPECT_EQ(resolve_budget(parse_budget("5"), inputs(8 * GiB)).slots, 5);
    EXPECT_EQ(resolve_budget(parse_budget("5"), inputs(8 * GiB)).bytes, uint64_t(5 * MiB));
    EXPECT_EQ(resolve_budget(parse_budget("10MB"), inputs(8 * GiB)).slots, 10);
    EXPECT_EQ(resolve_budget(parse_budget("10.5MB"), inputs(8 * GiB)).slots, 10);
    // Capped at the model's 64 experts, with a note; two layers = 32 slots.
    const Budget capped = resolve_budget(parse_budget("100"), inputs(8 * GiB));
    EXPECT_EQ(capped.slots, 64);
    EXPECT_NE(capped.note.find("capped"), std::string::npos);
    EXPECT_TRUE(capped.holds_two_layers);
    EXPECT_FALSE(resolve_budget(parse_budget("31"), inputs(8 * GiB)).holds_two_layers);
    // Auto: available - reserved - max(1 GiB, available/10), in slots, capped.
    EXPECT_EQ(resolve_budget(parse_budget("auto"), inputs(GiB + 40 * MiB, 10 * MiB)).slots, 30);
    EXPECT_EQ(resolve_budget(parse_budget("auto"), inputs(20 * GiB)).slots, 64);
    EXPECT_EQ(resolve_budget(parse_budget("auto"), inputs(-1)).slots, 32);  // unknown: two layers
    // Errors.
    EXPECT_NE(error_of([&] { resolve_budget(parse_budget("1"), inputs(8 * GiB)); }).find("at least 2 experts"),
              std::string::npos);
    EXPECT_NE(error_of([&] { resolve_budget(parse_budget("1MB"), inputs(8 * GiB)); }).find("at least 2 are needed"),
              std::string::npos);
    EXPECT_NE(error_of([&] { resolve_budget(parse_budget("40"), inputs(30 * MiB)); }).find("at most 30 experts"),
              std::string::npos);
    EXPECT_NE(error_of([&] { resolve_budget(parse_budget("1GB"), inputs(20 * MiB, 8 * MiB)); }).find("at most 12 experts"),
              std::string::npos);
    EXPECT_NE(error_of([&] { resolve_budget(parse_budget("auto"), inputs(GiB)); }).find("no room"),
              std::string::npos);
    // The startup line says requested and effective values.
    const std::string line = describe(resolve_budget(parse_budget("10MB"), inputs(8 * GiB)), inputs(8 * GiB));
    EXPECT_NE(line.find("requested 10MB, effective 10.00 MiB (10 experts of"), std::string::npos) << line;
}

TEST(StreamingSlotPolicy, FreeSlotsFirstThenTheColdestUnpinned) {
    SlotPolicy p(3, 2, 8, 1);
    std::vector<int64_t> slot_of;
    std::vector<SlotPolicy::Miss> misses;
    auto admit = [&](uint32_t layer, std::vector<int32_t> e, std::vector<int32_t> rows) {
        misses.clear();
        p.admit(layer, e, rows, slot_of, misses);
        p.unpin_all();
    };
    admit(0, {1, 2}, {5, 1});  // hotness 5 and 1
    ASSERT_EQ(misses.size(), 2u);
    EXPECT_FALSE(misses[0].evicted);
    EXPECT_EQ(p.occupied(), 2);
    admit(1, {3}, {3});  // the last free slot
    EXPECT_FALSE(misses[0].evicted);
    EXPECT_EQ(p.occupied(), 3);
    admit(0, {1}, {1});  // a hit
    EXPECT_TRUE(misses.empty());
    admit(1, {4}, {1});  // evicts (0, 2): hotness 1, the lowest
    ASSERT_EQ(misses.size(), 1u);
    EXPECT_TRUE(misses[0].evicted);
    EXPECT_EQ(p.find(0, 2), -1);
    EXPECT_GE(p.find(1, 4), 0);
    EXPECT_GE(p.find(0, 1), 0);
    EXPECT_GE(p.find(1, 3), 0);
    // (1, 4) is now the coldest (1 < 3 < 6) but pinned by the request itself: (1, 3) goes.
    misses.clear();
    p.admit(1, std::vector<int32_t>{4, 5}, std::vector<int32_t>{0, 0}, slot_of, misses);
    EXPECT_EQ(p.pinned(), 2);
    ASSERT_EQ(misses.size(), 1u);
    EXPECT_EQ(misses[0].expert, 5);
    EXPECT_EQ(p.find(1, 3), -1);
    // More experts than unpinned slots: an error, nothing changes.
    misses.clear();
    EXPECT_NE(error_of([&] { p.admit(0, std::vector<int32_t>{6, 7}, std::vector<int32_t>{1, 1}, slot_of, misses); })
                  .find("only 1 of 3 slots"),
              std::string::npos);
    p.unpin_all();
    EXPECT_EQ(p.occupied(), 3);
}

TEST(StreamingSlotPolicy, SeededHotnessDecidesBetweenPreloadedExperts) {
    SlotPolicy p(2, 1, 4, 1);
    std::vector<int64_t> slot_of;
    std::vector<SlotPolicy::Miss> misses;
    p.seed(0, 1, 1.0f);  // as a preload seeds them: the profile's rates, no route
    p.seed(0, 2, 9.0f);
    p.admit(0, std::vector<int32_t>{1, 2}, std::vector<int32_t>{0, 0}, slot_of, misses);
    p.unpin_all();
    EXPECT_EQ(p.hotness(0, 2), 9.0f);
    misses.clear();
    p.admit(0, std::vector<int32_t>{3}, std::vector<int32_t>{1}, slot_of, misses);
    ASSERT_EQ(misses.size(), 1u);
    EXPECT_TRUE(misses[0].evicted);
    EXPECT_EQ(p.find(0, 1), -1);  // the colder preloaded expert went
    EXPECT_GE(p.find(0, 2), 0);
}

TEST(StreamingSlotPolicy, HotnessHalvesEverySixteenTokensOfItsLayer) {
    SlotPolicy p(4, 2, 4, 2);  // 2 used: 16 tokens = 32 routes
    std::vector<int64_t> slot_of;
    std::vector<SlotPolicy::Miss> misses;
    p.admit(0, std::vector<int32_t>{0, 1}, std::vector<int32_t>{10, 20}, slot_of, misses);  // 15 tokens
    EXPECT_EQ(p.hotness(0, 0), 10.0f);
    p.unpin_all();
    p.admit(1, std::vector<int32_t>{2}, std::vector<int32_t>{64}, slot_of, misses);  // layer 1's clock only
    EXPECT_EQ(p.hotness(0, 0), 10.0f);
    p.unpin_all();
    p.admit(0, std::vector<int32_t>{1}, std::vector<int32_t>{2}, slot_of, misses);  // token 16: halves, then adds
    EXPECT_EQ(p.hotness(0, 0), 5.0f);
    EXPECT_EQ(p.hotness(0, 1), 12.0f);
    p.unpin_all();
    p.admit(0, std::vector<int32_t>{3}, std::vector<int32_t>{64}, slot_of, misses);  // two more periods
    EXPECT_EQ(p.hotness(0, 0), 1.25f);
    EXPECT_EQ(p.hotness(0, 3), 64.0f);
}

// The policy as its documentation states it, written the plain way: hotness decayed eagerly,
// victims by a scan of every slot.
struct ReferencePolicy {
    int64_t E, K;
    std::vector<int64_t> key;      // per slot
    std::vector<float> hot;        // per (layer, expert)
    std::vector<int64_t> routes;   // per layer
    ReferencePolicy(int64_t slots, int64_t L, int64_t E_, int64_t K_)
        : E(E_), K(K_), key(size_t(slots), -1), hot(size_t(L * E_), 0.0f), routes(size_t(L), 0) {}
    // Returns the slot each expert lands in, and which were misses.
    std::vector<std::pair<int64_t, bool>> admit(int64_t layer, const std::vector<int32_t>& experts,
                                                const std::vector<int32_t>& rows) {
        const int64_t period = 16 * K;
        int64_t added = 0;
        for (int32_t r : rows) added += r;
        const int64_t steps = (routes[size_t(layer)] + added) / period - routes[size_t(layer)] / period;
        routes[size_t(layer)] += added;
        for (int64_t e = 0; e < E; ++e)
            for (int64_t i = 0; i < steps; ++i) hot[size_t(layer * E + e)] *= 0.5f;
        for (size_t i = 0; i < experts.size(); ++i) hot[size_t(layer * E + experts[i])] += float(rows[i]);
        std::vector<char> pinned(key.size(), 0);
        std::vector<std::pair<int64_t, bool>> out(experts.size(), {-1, false});
        for (size_t i = 0; i < experts.size(); ++i)
            for (size_t s = 0; s < key.size(); ++s)
                if (key[s] == layer * E + experts[i]) {
                    out[i] = {int64_t(s), false};
                    pinned[s] = 1;
                }
        for (size_t i = 0; i < experts.size(); ++i) {
            if (out[i].first >= 0) continue;
            int64_t pick = -1;
            for (size_t s = 0; s < key.size() && pick < 0; ++s)
                if (key[s] < 0) pick = int64_t(s);
            if (pick < 0)
                for (size_t s = 0; s < key.size(); ++s) {
                    if (pinned[s]) continue;
                    if (pick < 0 || hot[size_t(key[s])] < hot[size_t(key[size_t(pick)])]) pick = int64_t(s);
                }
            key[size_t(pick)] = layer * E + experts[i];
            pinned[size_t(pick)] = 1;
            out[i] = {pick, true};
        }
        return out;
    }
};

TEST(StreamingSlotPolicy, EqualsThePlainStatementOfThePolicyOnRandomRuns) {
    std::mt19937 rng(7);
    for (int64_t slots : {2, 3, 5, 9, 17, 40}) {
        const int64_t L = 4, E = 12, K = 2;
        SlotPolicy p(slots, L, E, K);
        ReferencePolicy ref(slots, L, E, K);
        std::vector<int64_t> slot_of;
        std::vector<SlotPolicy::Miss> misses;
        for (int call = 0; call < 400; ++call) {
            // A decode step (one token) or a prompt chunk, its experts skewed towards low ids.
            const int64_t tokens = call % 7 == 0 ? 1 + int64_t(rng() % 40) : 1;
            for (int64_t layer = 0; layer < L; ++layer) {
                std::vector<int32_t> count(size_t(E), 0);
                for (int64_t t = 0; t < tokens * K; ++t) {
                    const double u = std::generate_canonical<double, 32>(rng);
                    ++count[size_t(std::min<int64_t>(E - 1, int64_t(u * u * double(E))))];
                }
                std::vector<int32_t> experts, rows;
                for (int64_t e = 0; e < E; ++e)
                    if (count[size_t(e)]) {
                        experts.push_back(int32_t(e));
                        rows.push_back(count[size_t(e)]);
                    }
                // Groups of at most `slots`, as the model runs them.
                for (size_t g = 0; g < experts.size(); g += size_t(slots)) {
                    const size_t n = std::min(experts.size() - g, size_t(slots));
                    const std::vector<int32_t> ge(experts.begin() + long(g), experts.begin() + long(g + n));
                    const std::vector<int32_t> gr(rows.begin() + long(g), rows.begin() + long(g + n));
                    misses.clear();
                    p.admit(uint32_t(layer), ge, gr, slot_of, misses);
                    const auto want = ref.admit(layer, ge, gr);
                    size_t m = 0;
                    for (size_t i = 0; i < n; ++i) {
                        ASSERT_EQ(slot_of[i], want[i].first) << "slots " << slots << " call " << call << " layer " << layer;
                        if (want[i].second) {
                            ASSERT_LT(m, misses.size());
                            EXPECT_EQ(misses[m++].slot, want[i].first);
                        }
                    }
                    EXPECT_EQ(m, misses.size());
                    for (int32_t e = 0; e < int32_t(E); ++e)
                        ASSERT_EQ(p.hotness(uint32_t(layer), e), ref.hot[size_t(layer * E + e)]);
                    p.unpin_all();
                }
            }
        }
    }
}

}  // namespace
}  // namespace ds4::streaming

namespace ds4::streaming {
namespace {

// A file of random bytes with three "layers" of 8 experts whose parts have odd sizes and
// offsets (not block-aligned), like GGUF tensors at 32-byte alignment.
struct FakeModel {
    test::TempDir dir;
    std::string path = dir.file("experts.bin");
    std::vector<uint8_t> bytes;
    model::ExpertFileLayout layout;
    FakeModel() {
        std::mt19937 rng(3);
        layout.path = path;
        layout.n_expert = 8;
        layout.n_expert_used = 2;
        layout.layers.resize(4);  // layer 2 holds no experts
        uint64_t at = 12345;
        for (uint32_t l : {0u, 1u, 3u}) {
            auto& L = layout.layers[l];
            L.held = true;
            const int64_t rows[3] = {10, 12, 9 + int64_t(l)};
            for (size_t k = 0; k < 3; ++k) {
                auto& p = L.parts[k];
                p.type = TensorType::F32;
                p.cols = 25;
                p.row_bytes = 100;
                p.rows_per_expert = rows[k];
                p.expert_bytes = uint64_t(rows[k]) * 100;
                p.offset = at;
                at += p.expert_bytes * 8 + 32 + 4 * k;
            }
        }
        bytes.resize(at);
        for (auto& b : bytes) b = uint8_t(rng());
        layout.file_size = bytes.size();
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), long(bytes.size()));
    }
};

TEST(StreamingExpertCache, ServesTheFileBytesOfEveryExpertAtEverySize) {
    FakeModel fake;
    std::mt19937 rng(11);
    for (bool direct : {false, true})
        for (int64_t slots : {2, 3, 8, 16, 24}) {
            ExpertCache cache(fake.layout, {.slots = slots, .io_threads = 3, .direct = direct});
            for (int call = 0; call < 300; ++call) {
                const uint32_t layer = std::vector<uint32_t>{0, 1, 3}[rng() % 3];
                std::vector<int32_t> experts;
                for (int32_t e = 0; e < 8; ++e)
                    if (rng() % 3 == 0) experts.push_back(e);
                if (experts.empty()) experts.push_back(int32_t(rng() % 8));
                if (int64_t(experts.size()) > slots) experts.resize(size_t(slots));
                // Sometimes a prompt-sized request (read-ahead of the next layer).
                const int32_t r = call % 5 == 0 ? 20 : 1;
                cache.prepare(layer, experts, std::vector<int32_t>(experts.size(), r));
                for (int32_t e : experts) {
                    const model::ExpertWeights w = cache.expert(layer, e);
                    const ops::Matrix* m[3] = {&w.gate, &w.up, &w.down};
                    for (size_t k = 0; k < 3; ++k) {
                        const auto& p = fake.layout.layers[layer].parts[k];
                        ASSERT_EQ(m[k]->rows, p.rows_per_expert);
                        ASSERT_EQ(m[k]->cols, p.cols);
                        ASSERT_EQ(std::memcmp(m[k]->data, fake.bytes.data() + p.offset + uint64_t(e) * p.expert_bytes,
                                              p.expert_bytes), 0)
                            << "layer " << layer << " expert " << e << " part " << k << " slots " << slots;
                        // The file's alignment within a block is kept.
                        EXPECT_EQ(uintptr_t(m[k]->data) % 4096, (p.offset + uint64_t(e) * p.expert_bytes) % 4096);
                    }
                }
                // Sometimes a forecast for another layer (read in the background, held until
                // the next prepare), right or not.
                if (call % 3 == 1) {
                    std::vector<int32_t> f;
                    for (int32_t e = 0; e < 8; ++e)
                        if (rng() % 4 == 0) f.push_back(e);
                    cache.hint(std::vector<uint32_t>{0, 1, 3}[rng() % 3], f);
                }
                cache.release(layer);
            }
            const CacheStats& st = cache.stats();
            EXPECT_LE(st.max_occupied, slots);
            EXPECT_GT(st.misses, 0u);
            // (With 24 slots the whole file is soon cached and nothing is left to read ahead.)
            if (slots == 16) {
                EXPECT_GT(st.read_ahead - st.hinted, 0u);
            }
            if (slots < 16) {
                EXPECT_EQ(st.read_ahead - st.hinted, 0u);
            }
            if (slots >= 8) {
                EXPECT_GT(st.hinted, 0u);
            }
            EXPECT_LE(st.hint_used, st.hinted);
        }
    // Asking for an expert that was not prepared, or more experts than slots, is an error.
    ExpertCache cache(fake.layout, {.slots = 2});
    EXPECT_NE(error_of([&] { cache.expert(0, 1); }).find("without prepare"), std::string::npos);
    EXPECT_NE(error_of([&] { cache.prepare(0, std::vector<int32_t>{1, 2, 3}, std::vector<int32_t>{1, 1, 1}); })
                  .find("only 2 of 2 slots"),
              std::string::npos);
    EXPECT_NE(error_of([&] { cache.prepare(2, std::vector<int32_t>{1}, std::vector<int32_t>{1}); }).find("no streamed experts"),
              std::string::npos);
}

// Decode lookahead: a forecast's missing experts are read before the next prepare(), which then
// finds them; a layer whose forecasts keep missing stops being read for, and starts again once
// its forecasts are right.
TEST(StreamingExpertCache, ReadsForecastExpertsAndStopsReadingForALayerWhoseForecastsMiss) {
    FakeModel fake;
    {
        ExpertCache cache(fake.layout, {.slots = 16});
        cache.prepare(0, std::vector<int32_t>{0}, std::vector<int32_t>{1});
        cache.hint(1, std::vector<int32_t>{2, 5});
        cache.release(0);
        const uint64_t misses = cache.stats().misses;
        cache.prepare(1, std::vector<int32_t>{2, 5, 6}, std::vector<int32_t>{1, 1, 1});
        EXPECT_EQ(cache.stats().hinted, 2u);
        EXPECT_EQ(cache.stats().misses, misses + 1);  // only 6
        EXPECT_EQ(cache.stats().hint_used, 2u);
        const auto& p = fake.layout.layers[1].parts[2];
        EXPECT_EQ(std::memcmp(cache.expert(1, 5).down.data, fake.bytes.data() + p.offset + 5 * p.expert_bytes,
                              p.expert_bytes),
                  0);
        cache.release(1);
        // Without lookahead the forecast is ignored.
        ExpertCache off(fake.layout, {.slots = 16, .lookahead = false});
        EXPECT_FALSE(off.wants_hints());
        off.prepare(0, std::vector<int32_t>{0}, std::vector<int32_t>{1});
        off.hint(1, std::vector<int32_t>{2, 5});
        off.release(0);
        off.prepare(1, std::vector<int32_t>{2, 5}, std::vector<int32_t>{1, 1});
        EXPECT_EQ(off.stats().hinted, 0u);
        EXPECT_EQ(off.stats().misses, 3u);
    }
    // 4 slots: each round evicts, so a forecast that is read shows in `hint_scheduled`.
    ExpertCache cache(fake.layout, {.slots = 4});
    const std::vector<std::vector<int32_t>> pairs = {{2, 3}, {4, 5}, {6, 7}};
    auto round = [&](const std::vector<int32_t>& forecast, const std::vector<int32_t>& asked) {
        cache.prepare(0, std::vector<int32_t>{0}, std::vector<int32_t>{1});
        cache.hint(1, forecast);
        cache.release(0);
        cache.prepare(1, asked, std::vector<int32_t>(asked.size(), 1));
        cache.release(1);
        return cache.stats().hint_scheduled;  // wrong forecasts may be skipped before they are read
    };
    std::vector<uint64_t> hinted;
    for (int r = 0; r < 30; ++r) hinted.push_back(round(pairs[0], pairs[size_t(1 + r % 2)]));  // always wrong
    EXPECT_GT(hinted[5], hinted[0]);            // read at first
    EXPECT_EQ(hinted[29], hinted[19]);          // then no longer
    EXPECT_EQ(cache.stats().hint_used, 0u);
    for (int r = 0; r < 10; ++r) round(pairs[size_t(r % 3)], pairs[size_t(r % 3)]);  // right
    EXPECT_GT(cache.stats().hint_scheduled, hinted[29]);  // read again
    EXPECT_GT(cache.stats().hint_used, 0u);
}

}  // namespace
}  // namespace ds4::streaming
