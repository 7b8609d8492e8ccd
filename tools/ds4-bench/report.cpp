#include "report.h"

#include <fmt/format.h>

#include "common/error.h"

namespace ds4::bench {

std::string csv_line(const Row& r, bool spec) {
    std::string line = fmt::format("{},{},{:.3f},{},{:.3f},{},{}", r.ctx_tokens, r.prefill_tokens,
                                   r.prefill_tps, r.gen_tokens, r.gen_tps, r.kvcache_bytes, r.sessions);
    if (spec)
        line += fmt::format(",{},{:.3f},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f}",
                            r.draft_max, r.aid_accept, r.steps, r.drafted, r.accepted,
                            r.per_step(r.drafted), r.per_step(r.accepted), r.rows_per_step(),
                            r.acceptance(), r.tokens_per_step(), r.ms_per_step(), r.x_plain(),
                            r.cpu_ms_per_step());
    return line;
}

CsvWriter::CsvWriter(const std::string& path, bool spec)
    : path_(path), spec_(spec), f_(nullptr, &std::fclose) {
    if (path.empty()) return;
    f_.reset(std::fopen(path.c_str(), "w"));
    if (!f_) fail("--csv {}: cannot open for writing", path);
    const std::string header = spec ? std::string(kCsvHeader) + "," + kSpecCsvColumns : kCsvHeader;
    if (std::fprintf(f_.get(), "%s\n", header.c_str()) < 0 || std::fflush(f_.get()) != 0)
        fail("--csv {}: write failed", path);
}

void CsvWriter::add(const Row& r) {
    if (!f_) return;
    if (std::fprintf(f_.get(), "%s\n", csv_line(r, spec_).c_str()) < 0 || std::fflush(f_.get()) != 0)
        fail("--csv {}: write failed", path_);
}

void print_table_header(std::FILE* out, bool spec) {
    std::fprintf(out, "%10s %10s %12s %8s %10s %12s", "ctx", "prefill", "prefill t/s", "gen",
                 "gen t/s", "KV MiB");
    if (spec)
        std::fprintf(out, " %6s %7s %7s %8s %8s %8s %7s %7s %8s %7s %8s", "draft", "aid p", "steps",
                     "drft/st", "acc/st", "rows/st", "acc %", "tok/st", "ms/step", "x plain", "cpu ms");
    std::fprintf(out, "\n");
    std::fflush(out);
}

void print_table_row(std::FILE* out, const Row& r, bool spec) {
    std::fprintf(out, "%10lld %10lld %12.2f %8lld %10.2f %12.2f",
                 static_cast<long long>(r.ctx_tokens), static_cast<long long>(r.prefill_tokens),
                 r.prefill_tps, static_cast<long long>(r.gen_tokens), r.gen_tps,
                 double(r.kvcache_bytes) / (1024.0 * 1024.0));
    if (spec)
        std::fprintf(out, " %6lld %7.2f %7lld %8.2f %8.2f %8.2f %7.1f %7.2f %8.2f %7.2f %8.2f",
                     static_cast<long long>(r.draft_max), r.aid_accept, static_cast<long long>(r.steps),
                     r.per_step(r.drafted), r.per_step(r.accepted), r.rows_per_step(),
                     100.0 * r.acceptance(), r.tokens_per_step(), r.ms_per_step(), r.x_plain(),
                     r.cpu_ms_per_step());
    std::fprintf(out, "\n");
    std::fflush(out);
}

}  // namespace ds4::bench
