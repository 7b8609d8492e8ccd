// One ds4-bench row per frontier, written as upstream's CSV (the columns tools and charts
// read) and as a human-readable table. Shared with the llama.cpp peer (bench/peer_bench.cpp).
// With --spec-aid a frontier has more rows (one per draft depth and acceptance, after the
// plain one), and the CSV and table have the verification columns too.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>

namespace ds4::bench {

struct Row {
    int64_t ctx_tokens = 0;      // the frontier
    int64_t prefill_tokens = 0;  // tokens prefilled since the previous frontier (timed)
    double prefill_tps = 0;
    int64_t gen_tokens = 0;      // tokens of the decode probe (timed)
    double gen_tps = 0;          // 0 when gen_tokens is 0
    int64_t kvcache_bytes = 0;   // KV state held at the frontier (one sequence)
    int64_t sessions = 1;        // sequences decoding together in the probe; gen_tps is their sum

    // Speculative verification (--spec-aid); a plain probe has draft_max 0, steps = gen_tokens.
    int64_t draft_max = 0;       // draft tokens offered per step at most
    double aid_accept = 0;       // the aid's chance that a draft token is right
    int64_t steps = 0;           // evaluation steps of the probe (pending token + its drafts)
    int64_t drafted = 0;         // draft tokens evaluated
    int64_t accepted = 0;        // of those, kept (equal to the greedy choice)
    double plain_tps = 0;        // the plain probe's gen_tps at the same frontier (0: unknown)
    double cpu_seconds = 0;      // the process's CPU time over the probe (all threads)

    double acceptance() const { return drafted ? double(accepted) / double(drafted) : 0; }
    double per_step(int64_t n) const { return steps ? double(n) / double(steps) : 0; }
    // Rows evaluated per step (the pending token and its drafts), tokens decoded per step.
    double rows_per_step() const { return per_step(steps + drafted); }
    double tokens_per_step() const { return per_step(gen_tokens); }
    double ms_per_step() const {
        return steps && gen_tps > 0 ? 1000.0 * double(gen_tokens) / gen_tps / double(steps) : 0;
    }
    double x_plain() const { return plain_tps > 0 ? gen_tps / plain_tps : 0; }
    // CPU time per step: on a shared machine, less inflated than wall time by other
    // processes taking the cores (not by their share of the memory bandwidth).
    double cpu_ms_per_step() const { return steps ? 1000.0 * cpu_seconds / double(steps) : 0; }
};

inline constexpr const char* kCsvHeader =
    "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes,sessions";

// The verification columns that follow kCsvHeader with --spec-aid.
inline constexpr const char* kSpecCsvColumns =
    "draft_max,aid_accept,steps,drafted,accepted,drafted_per_step,accepted_per_step,"
    "rows_per_step,acceptance,tokens_per_step,ms_per_step,x_plain,cpu_ms_per_step";

std::string csv_line(const Row& r, bool spec = false);  // no newline

// Writes the header at construction and one flushed line per add(), so a long sweep leaves
// its finished rows behind if interrupted. An empty path writes nothing. Throws ds4::Error
// when the file cannot be written. `spec`: the verification columns too.
class CsvWriter {
public:
    explicit CsvWriter(const std::string& path, bool spec = false);
    void add(const Row& r);

private:
    std::string path_;
    bool spec_ = false;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
};

// The table: a header line, then one line per row (flushed, for progress); `spec`: the
// verification columns too.
void print_table_header(std::FILE* out, bool spec = false);
void print_table_row(std::FILE* out, const Row& r, bool spec = false);

}  // namespace ds4::bench
