// One ds4-bench row per frontier, written as upstream's CSV (the columns tools and charts
// read) and as a human-readable table. Shared with the llama.cpp peer (bench/peer_bench.cpp).
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
};

inline constexpr const char* kCsvHeader =
    "ctx_tokens,prefill_tokens,prefill_tps,gen_tokens,gen_tps,kvcache_bytes,sessions";

std::string csv_line(const Row& r);  // no newline

// Writes the header at construction and one flushed line per add(), so a long sweep leaves
// its finished rows behind if interrupted. An empty path writes nothing. Throws ds4::Error
// when the file cannot be written.
class CsvWriter {
public:
    explicit CsvWriter(const std::string& path);
    void add(const Row& r);

private:
    std::string path_;
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f_;
};

// The table: a header line, then one line per row (flushed, for progress).
void print_table_header(std::FILE* out);
void print_table_row(std::FILE* out, const Row& r);

}  // namespace ds4::bench
