// The SSD streaming flags, defined once for ds4, ds4-bench and ds4-server
// (docs/SSD_STREAMING.md), and what they do to a model once it is open:
//
//   streaming::Options so;  streaming::add_flags(app, so);         // at parse time
//   auto m = model::open(path, {..., .stream_experts = so.enabled});
//   auto st = streaming::attach(*m, so, streaming::reserved_bytes(*m, seq_opt, 1));
//   ...                                                            // run
//   st.reset();  // prints the cache counters, writes --expert-profile
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <string>

#include "model/model.h"
#include "streaming/budget.h"
#include "streaming/expert_cache.h"
#include "streaming/full_layers.h"
#include "streaming/profile.h"

namespace ds4::streaming {

struct Options {
    bool enabled = false;             // --ssd-streaming
    std::string cache_experts = "auto";  // --ssd-streaming-cache-experts N|NGB|NMB|auto
    bool cold = false;                // --ssd-streaming-cold: no preload
    int64_t preload_experts = -1;     // --ssd-streaming-preload-experts N (-1: fill the cache)
    std::string preload_file;         // --ssd-streaming-preload FILE (an --expert-profile output)
    bool direct = false;              // --ssd-streaming-direct: O_DIRECT reads
    int io_threads = 4;               // --ssd-streaming-io-threads N
    bool read_ahead = true;           // --ssd-streaming-no-read-ahead turns it off
    bool lookahead = true;            // --ssd-streaming-no-lookahead turns it off
    std::string full_layers = "0";    // --ssd-streaming-full-layers N|auto (0: off)
    std::string profile_out;          // --expert-profile FILE
    std::string simulate_used;        // --simulate-used-memory NGB (streaming/used_memory.h)
};

// Adds the flags to `app` under `group`, with their checks (a bad budget is a usage error).
void add_flags(CLI::App& app, Options& o, const std::string& group = "SSD streaming");
// Combinations the flags alone cannot check; throws ds4::Error.
void check(const Options& o);

// Bytes besides the cache that a run still allocates: `sequences` sequences with `opt`, plus
// scratch (estimated; see docs/SSD_STREAMING.md).
int64_t reserved_bytes(const model::Model& m, const model::SequenceOptions& opt, int64_t sequences);

// What attach() set up; on destruction logs the cache counters (common/log.h) and writes the
// profile.
class Attachment {
public:
    ~Attachment();
    ExpertCache* cache() const { return cache_.get(); }  // null when every routed layer is full
    FullLayers* full_layers() const { return full_.get(); }  // null without full layers
    ProfilingSource* profile() const { return profile_.get(); }
    const Budget& budget() const { return budget_; }
    // The end-of-run line (hit rate, bytes read, read GB/s), empty without a cache.
    std::string summary() const;
    // The counters between two readings of cache()->stats() over `tokens` evaluated tokens in
    // `seconds` of wall time: misses and bytes per token, the read rate, and how much of each
    // token's time was spent waiting for reads (the rest is compute). "" without a cache.
    std::string phase_summary(const std::string& what, const CacheStats& before, int64_t tokens,
                              double seconds) const;
    // Writes --expert-profile now (also done on destruction); throws ds4::Error.
    void write_profile();

private:
    friend std::unique_ptr<Attachment> attach(model::Model&, const Options&, int64_t);
    std::shared_ptr<ExpertCache> cache_;
    std::shared_ptr<FullLayers> full_;
    std::shared_ptr<ProfilingSource> profile_;
    std::string profile_path_;
    bool profile_written_ = false;
    Budget budget_;
};

// Sets the model's expert source per `o`: the streaming cache (the model must have been opened
// with stream_experts = o.enabled), sized by --ssd-streaming-cache-experts against what is
// available after `reserved` bytes, less the --ssd-streaming-full-layers read into memory, preloaded from --ssd-streaming-preload unless --cold, and
// wrapped for --expert-profile. Logs the startup line. Returns nullptr when no flag
// asks for anything.
std::unique_ptr<Attachment> attach(model::Model& m, const Options& o, int64_t reserved);

}  // namespace ds4::streaming
