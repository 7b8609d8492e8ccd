#include "streaming/options.h"

#include <algorithm>

#include "common/cli_checks.h"
#include "common/error.h"
#include "common/log.h"
#include "model/context_check.h"
#include "streaming/used_memory.h"

namespace ds4::streaming {

void add_flags(CLI::App& app, Options& o, const std::string& group) {
    app.add_flag("--ssd-streaming", o.enabled,
                 "Keep the routed experts on disk: read them on demand into a bounded cache "
                 "(models larger than memory; docs/SSD_STREAMING.md); everything else is read "
                 "into memory")
        ->group(group);
    app.add_option("--ssd-streaming-cache-experts", o.cache_experts,
                   "Expert cache size: N experts, or NGB / NMB of memory (whole experts of this "
                   "file); default auto: what memory is left after the weights, KV and a margin")
        ->option_text("N|NGB")
        ->check(CLI::Validator([](std::string& s) { return budget_error(s); }, "N|NGB", "budget"))
        ->group(group);
    app.add_flag("--ssd-streaming-cold", o.cold, "Start with an empty expert cache (no preload; for measurements)")
        ->group(group);
    app.add_option("--ssd-streaming-preload", o.preload_file,
                   "Seed the expert cache at startup with the most routed experts of an "
                   "--expert-profile FILE")
        ->option_text("FILE")
        ->group(group);
    app.add_option("--ssd-streaming-preload-experts", o.preload_experts,
                   "With --ssd-streaming-preload: seed at most N experts (default: fill the cache)")
        ->option_text("N")
        ->check(cli_checks::at_least(0))
        ->group(group);
    app.add_flag("--ssd-streaming-direct", o.direct,
                 "Read experts with O_DIRECT (bypass the page cache; buffered where refused)")
        ->group(group);
    app.add_flag("--ssd-streaming-no-read-ahead", [&o](int64_t) { o.read_ahead = false; },
                 "Prefill reads only the experts a layer asks for (no background read of the next "
                 "layer's experts)")
        ->group(group);
    app.add_flag("--ssd-streaming-no-lookahead", [&o](int64_t) { o.lookahead = false; },
                 "Decode reads only the experts a layer asks for (no background read of the experts "
                 "forecast for the next layer)")
        ->group(group);
    app.add_option("--ssd-streaming-full-layers", o.full_layers,
                   "Read the routed experts of the first N routed layers whole into memory and "
                   "stream the rest (their bytes come out of the cache budget); auto: as many as "
                   "the budget holds besides two layers' experts; default 0: off")
        ->option_text("N|auto")
        ->check(CLI::Validator([](std::string& s) { return full_layers_error(s); }, "N|auto", "full layers"))
        ->group(group);
    app.add_option("--ssd-streaming-io-threads", o.io_threads,
                   "Parallel reads of one layer's missing experts (default 4)")
        ->option_text("N")
        ->check(cli_checks::in_range(1, 64))
        ->group(group);
    app.add_option("--simulate-used-memory", o.simulate_used,
                   "Lock N GiB of memory before the model loads, to behave like a machine with that "
                   "much less (memory checks, the auto cache size, the page cache)")
        ->option_text("NGB")
        ->check(CLI::Validator([](std::string& s) { return used_memory_error(s); }, "NGB", "size"))
        ->group(group);
    app.add_option("--expert-profile", o.profile_out,
                   "At exit, write per (layer, expert) routing counts and a cache simulation at "
                   "several sizes as JSON (docs/SSD_STREAMING.md)")
        ->option_text("FILE")
        ->group(group);
}

void check(const Options& o) {
    const bool tuned = o.cache_experts != "auto" || o.cold || o.preload_experts >= 0 || !o.preload_file.empty() ||
                       o.direct || o.io_threads != 4 || !o.read_ahead || !o.lookahead || o.full_layers != "0";
    if (tuned && !o.enabled)
        fail("the --ssd-streaming-* options need --ssd-streaming");
    if (o.preload_experts >= 0 && o.preload_file.empty())
        fail("--ssd-streaming-preload-experts needs --ssd-streaming-preload FILE (the profile to rank experts by)");
}

int64_t reserved_bytes(const model::Model& m, const model::SequenceOptions& opt, int64_t sequences) {
    // Scratch: the forward pass's per-chunk activations, a few hundred MiB at the default
    // chunk of the Flash shape; 512 MiB covers them.
    return m.sequence_bytes(opt) * std::max<int64_t>(1, sequences) + (int64_t(512) << 20);
}

Attachment::~Attachment() {
    try {
        if (cache_) log::info("{}", summary());
        write_profile();
    } catch (const std::exception& e) {
        log::error("ds4: {}", e.what());
    }
}

std::string Attachment::summary() const {
    if (!cache_) return {};
    const CacheStats& s = cache_->stats();
    return fmt::format("ssd streaming: {} expert hits, {} misses (hit rate {:.1f}%), {} read ahead ({} forecast for decode, {} of them used), {} evictions, "
                       "read {} ({} bytes) in {:.2f} s ({:.2f} GB/s), waited {:.2f} s, at most {} of {} slots used",
                       s.hits, s.misses, 100.0 * s.hit_rate(), s.read_ahead, s.hinted, s.hint_used, s.evictions, human_bytes(s.bytes_read),
                       s.bytes_read, s.read_seconds,
                       s.read_seconds > 0 ? double(s.bytes_read) / s.read_seconds / 1e9 : 0.0, s.wait_seconds,
                       s.max_occupied, cache_->slots());
}

std::string Attachment::phase_summary(const std::string& what, const CacheStats& b, int64_t tokens,
                                      double seconds) const {
    if (!cache_ || tokens <= 0 || seconds <= 0) return {};
    const CacheStats& a = cache_->stats();
    const double n = double(tokens);
    const uint64_t misses = a.misses - b.misses, hits = a.hits - b.hits, bytes = a.bytes_read - b.bytes_read;
    const double read_s = a.read_seconds - b.read_seconds, wait_s = a.wait_seconds - b.wait_seconds;
    return fmt::format("ssd streaming, {}: {} tokens, {:.1f} misses and {:.1f} hits per token ({:.1f} forecast reads, "
                       "{:.1f} used), {:.1f} MB read per token at {:.2f} GB/s; {:.3f} s per token, of which {:.3f} s "
                       "waiting for reads and {:.3f} s computing",
                       what, tokens, double(misses) / n, double(hits) / n, double(a.hinted - b.hinted) / n,
                       double(a.hint_used - b.hint_used) / n, double(bytes) / n / 1e6,
                       read_s > 0 ? double(bytes) / read_s / 1e9 : 0.0, seconds / n, wait_s / n,
                       std::max(0.0, seconds - wait_s) / n);
}

void Attachment::write_profile() {
    if (!profile_ || profile_written_) return;
    profile_written_ = true;
    profile_->write(profile_path_, cache_ ? cache_->slots() : 0);
}

namespace {

// --ssd-streaming-full-layers against the resolved budget: which routed layers are read whole,
// and the slots the cache keeps for the others (the budget less their bytes).
struct FullLayerPlan {
    std::vector<uint32_t> layers;
    int64_t streamed_layers = 0;
    int64_t cache_slots = 0;
};

FullLayerPlan plan_full_layers(const Options& o, const model::ExpertFileLayout& layout, const Budget& budget,
                               const BudgetInputs& in) {
    const std::vector<uint32_t> routed = routed_layers(layout);
    uint64_t layer_bytes = 0;
    for (uint32_t il : routed)
        layer_bytes = std::max(layer_bytes, uint64_t(layout.n_expert) * layout.layers[il].expert_bytes());
    const int64_t n = resolve_full_layers(parse_full_layers(o.full_layers), budget.slots, in.slot_bytes,
                                          layer_bytes, int64_t(routed.size()), layout.n_expert);
    FullLayerPlan p;
    p.layers.assign(routed.begin(), routed.begin() + n);
    p.streamed_layers = int64_t(routed.size()) - n;
    uint64_t full_bytes = 0;
    for (uint32_t il : p.layers) full_bytes += uint64_t(layout.n_expert) * layout.layers[il].expert_bytes();
    const int64_t taken = int64_t((full_bytes + in.slot_bytes - 1) / in.slot_bytes);
    p.cache_slots = std::min(budget.slots - taken, p.streamed_layers * layout.n_expert);
    if (p.streamed_layers > 0 && p.cache_slots < layout.n_expert_used)
        fail("--ssd-streaming-full-layers {}: {} full layers take {} of the {} budget, leaving {} experts for the "
             "cache of the other layers; at least {} are needed (one token's experts of a layer)", o.full_layers, n,
             human_bytes(full_bytes), human_bytes(budget.bytes), std::max<int64_t>(0, p.cache_slots),
             layout.n_expert_used);
    return p;
}

}  // namespace

std::unique_ptr<Attachment> attach(model::Model& m, const Options& o, int64_t reserved) {
    check(o);
    if (!o.enabled && o.profile_out.empty()) return nullptr;
    auto a = std::unique_ptr<Attachment>(new Attachment());
    const model::ExpertFileLayout layout = m.expert_layout();
    std::shared_ptr<model::ExpertSource> source = m.expert_source();
    if (o.enabled) {
        // Slot geometry first (nothing is reserved until the count is known).
        int64_t layers = 0;
        for (const auto& L : layout.layers) layers += L.held ? 1 : 0;
        if (layers == 0) fail("{}: --ssd-streaming: the model's layers hold no routed experts", layout.path);
        const BudgetRequest req = parse_budget(o.cache_experts);
        // A one-slot probe gives the slot size without reserving the cache.
        uint64_t slot_bytes = 0, expert_bytes = 0;
        {
            ExpertCache probe(layout, {.slots = 1, .io_threads = 1});
            slot_bytes = probe.slot_bytes();
            expert_bytes = probe.expert_bytes();
        }
        const BudgetInputs in{.slot_bytes = slot_bytes, .expert_bytes = expert_bytes, .n_expert = layout.n_expert,
                              .n_expert_used = layout.n_expert_used, .n_layers = layers,
                              .available = model::available_memory(), .reserved = reserved};
        a->budget_ = resolve_budget(req, in);
        const FullLayerPlan full = plan_full_layers(o, layout, a->budget_, in);
        std::string line;
        if (full.streamed_layers > 0) {
            Budget& b = a->budget_;
            b.slots = full.cache_slots;
            b.bytes = uint64_t(b.slots) * slot_bytes;
            b.holds_two_layers = b.slots >= 2 * layout.n_expert;
            a->cache_ = std::make_shared<ExpertCache>(
                without_layers(layout, full.layers),
                CacheOptions{.slots = b.slots, .io_threads = o.io_threads, .direct = o.direct,
                             .read_ahead = o.read_ahead, .lookahead = o.lookahead});
            BudgetInputs streamed = in;
            streamed.n_layers = full.streamed_layers;
            line = describe(b, streamed);
            if (o.direct && !a->cache_->direct()) line += "; O_DIRECT refused by the file system, buffered reads";
            source = a->cache_;
        } else {
            a->budget_.slots = 0;
            a->budget_.bytes = 0;
            a->budget_.holds_two_layers = false;
            line = "ssd streaming: no expert cache (every routed layer is full)";
        }
        if (!full.layers.empty()) {
            a->full_ = std::make_shared<FullLayers>(layout, full.layers, a->cache_);
            line += fmt::format("; full layers: the first {} routed layers ({}-{}) resident, {}", full.layers.size(),
                                full.layers.front(), full.layers.back(), human_bytes(a->full_->bytes()));
            source = a->full_;
        }
        if (!o.preload_file.empty() && !o.cold && a->cache_) {
            const int64_t n = o.preload_experts >= 0 ? o.preload_experts : a->budget_.slots;
            // The full layers are in memory already: the preload seeds the streamed ones.
            auto hot = hottest_experts(o.preload_file, int64_t(layout.layers.size()), layout.n_expert, -1);
            std::erase_if(hot, [&](const HotExpert& h) {
                return std::find(full.layers.begin(), full.layers.end(), h.layer) != full.layers.end();
            });
            if (int64_t(hot.size()) > n) hot.resize(size_t(n));
            const int64_t loaded = a->cache_->preload(hot);
            line += fmt::format("; preloaded {} experts from {}", loaded, o.preload_file);
        } else if (!o.preload_file.empty()) {
            line += "; cold start (no preload)";
        }
        log::info("{}", line);
    }
    if (!o.profile_out.empty()) {
        a->profile_ = std::make_shared<ProfilingSource>(source, layout);
        a->profile_path_ = o.profile_out;
        source = a->profile_;
    }
    m.set_expert_source(source);
    return a;
}

}  // namespace ds4::streaming
