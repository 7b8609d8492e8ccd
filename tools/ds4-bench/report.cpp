#include "report.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ds4::bench {

std::string csv_line(const Row& r) {
    return fmt::format("{},{},{:.3f},{},{:.3f},{},{}", r.ctx_tokens, r.prefill_tokens, r.prefill_tps,
                       r.gen_tokens, r.gen_tps, r.kvcache_bytes, r.sessions);
}

CsvWriter::CsvWriter(const std::string& path) : path_(path), f_(nullptr, &std::fclose) {
    if (path.empty()) return;
    f_.reset(std::fopen(path.c_str(), "w"));
    if (!f_) fail("--csv {}: cannot open for writing", path);
    if (std::fprintf(f_.get(), "%s\n", kCsvHeader) < 0 || std::fflush(f_.get()) != 0)
        fail("--csv {}: write failed", path);
}

void CsvWriter::add(const Row& r) {
    if (!f_) return;
    if (std::fprintf(f_.get(), "%s\n", csv_line(r).c_str()) < 0 || std::fflush(f_.get()) != 0)
        fail("--csv {}: write failed", path_);
}

void print_table_header(std::FILE* out) {
    std::fprintf(out, "%10s %10s %12s %8s %10s %12s\n", "ctx", "prefill", "prefill t/s", "gen",
                 "gen t/s", "KV MiB");
    std::fflush(out);
}

void print_table_row(std::FILE* out, const Row& r) {
    std::fprintf(out, "%10lld %10lld %12.2f %8lld %10.2f %12.2f\n",
                 static_cast<long long>(r.ctx_tokens), static_cast<long long>(r.prefill_tokens),
                 r.prefill_tps, static_cast<long long>(r.gen_tokens), r.gen_tps,
                 double(r.kvcache_bytes) / (1024.0 * 1024.0));
    std::fflush(out);
}

}  // namespace ds4::bench
