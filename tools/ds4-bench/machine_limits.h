// The machine's limits that ds4-bench's figures are measured against (issue 33, item 4):
// the memory read bandwidth (decode streams the weights once per step), the int8 compute
// peak (prefill is a few large int8 products per token) and what one step must read.
// Shared with bench/membw_probe.cpp and bench/decode_bytes.cpp, so the tools and
// bench/side_by_side.sh count the same way.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "report.h"

namespace ds4::gguf {
class File;
}

namespace ds4::bench {

// Read bandwidth: a buffer far larger than the caches (on transparent huge pages, as the
// weights are) summed with wide loads over `threads` threads, each repetition both with plain
// loads and with software prefetch 12 KiB ahead (as the decode kernels read); the faster
// way's median, in GB/s (1e9 bytes per second).
struct Bandwidth {
    double gbps = 0, min = 0, max = 0;  // the reported way's median and range
    double plain = 0, ahead = 0;        // the two ways' medians
    bool prefetch = false;              // the reported way is the prefetching one
    const char* isa = "";
};
Bandwidth probe_bandwidth(int64_t mib, int threads, int64_t reps);

// The int8 peak of `threads` cores: the multiply-accumulates one core's widest int8
// dot instruction (AVX-512 VNNI vpdpbusd: 64 u8 x s8 products into 16 int32 lanes) retires
// per cycle times the clock, both measured here on one thread (independent vpdpbusd chains;
// a chain of dependent 1-cycle adds for the clock), the instructions per cycle rounded to the
// nearest half (the ISA's throughput; noise only lowers the measure). 2 ops per MAC.
// gops 0 where the CPU has no AVX-512 VNNI.
struct Int8Peak {
    double ghz = 0;            // measured clock
    double per_cycle = 0;      // vpdpbusd per cycle per core, measured
    double per_cycle_isa = 0;  // ... rounded: the throughput the peak assumes
    int threads = 0;
    double gops = 0;           // threads x per_cycle_isa x 64 MACs x 2 x ghz
    std::string how() const;   // one line saying so
};
Int8Peak probe_int8_peak(int threads);

// The weight bytes and products of one decode step, counted from the file's tensors. Per
// token: every dense tensor (attention, compressors, indexer, router, HC, norms) in full, the
// shared expert in full, n_expert_used of the n_expert routed experts, one row of the token
// embedding and of tid2eid, the whole output head. ds4 skips a ratio-4 layer's indexer
// queries (indexer.attn_q_b, indexer.proj) while a token sees no more than top-k compressed
// rows ((ctx + 1) / 4 <= top_k: model/attention.cpp); GLM 5.2 (glm-dsa) always computes
// them, and its embedded MTP block (blk.<n_layer>) is not counted.
struct StepCount {
    uint32_t n_layer = 0, n_expert = 0, n_expert_used = 0, n_vocab = 0;
    double dense = 0, routed = 0, shared = 0, output = 0, embd = 0;  // bytes, full count
    std::map<std::string, double> by_type;  // the same bytes per tensor type
    double indexer_query = 0;  // bytes of the ratio-4 layers' indexer queries (in dense)
    uint32_t indexer_top_k = 0;
    bool skips_indexer = false;  // deepseek4: those are skipped at small contexts
    // Weight values a prompt token multiplies (dense, shared and used routed experts; not the
    // embedding rows nor the output head, which prefill runs for the last token only).
    double prefill_macs = 0;

    double all() const { return dense + routed + shared + output + embd; }
    // What ds4 reads for one token decoded after ctx tokens of context.
    double at(int64_t ctx) const;
    // One step of `rows` tokens (sequences decoding together, or a verification step): the
    // non-routed weights once and each row's routed experts (rows of different tokens choose
    // different experts; the bound a memory-bound step reaches).
    double step(int64_t ctx, double rows) const { return at(ctx) + (rows - 1) * routed; }
    // Aggregate t/s of `rows` rows over one row's, purely memory-bound: rows * B / step.
    double ceiling(int64_t ctx, double rows) const { return rows * at(ctx) / step(ctx, rows); }
};
StepCount count_step(const gguf::File& file);

// What ds4-bench --limits measures each row against.
struct Limits {
    StepCount count;
    double membw_gbps = 0;      // read bandwidth
    double int8_peak_gops = 0;  // 0: unknown (prefill's share not printed)
};

// One row's distance from the limits (one line, no newline), empty when the row has neither
// prefill nor decode. Prefill: prefill_tps x 2 x prefill_macs against the int8 peak (the
// weight products only; attention's work is not counted). Decode: a step of k rows (the
// sequences of --sessions, or a verification step's rows on average) reads
// count.step(ctx, k) bytes; steps/s x those bytes against the bandwidth, which is also the
// share of the memory-bound ceiling (the t/s a step at the full bandwidth would give, printed
// with its ratio to one row's when k > 1).
std::string limits_line(const Row& r, const Limits& l);

}  // namespace ds4::bench
