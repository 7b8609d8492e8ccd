// ds4-eval's --trace file and --regrade-trace (docs/EVAL.md, "Trace format"): a text file, a
// header of "key: value" lines, then per case a "===== CASE i/n suite/id =====" line, its
// fields as "key: value" lines and the prompt and output as length-prefixed blocks
// ("MODEL_OUTPUT_BEGIN bytes=N", N raw bytes, a newline, "MODEL_OUTPUT_END"), so any text the
// model wrote (a line that looks like a case header included) reads back byte for byte. A
// trace holds each case's answer kind, key and choices, so it regrades on its own.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "eval/cases.h"
#include "eval/runner.h"

namespace ds4::eval {

class TraceWriter {
public:
    // Opens (truncates) `path`; throws ds4::Error when it cannot. Header fields are written in
    // the order given.
    TraceWriter(const std::string& path, const std::vector<std::pair<std::string, std::string>>& header);
    ~TraceWriter();
    TraceWriter(const TraceWriter&) = delete;
    TraceWriter& operator=(const TraceWriter&) = delete;
    // One case, flushed at once (a trace of an interrupted run holds every finished case).
    void write(int index, int total, const Case& c, const Outcome& o, const std::string& system);

private:
    std::FILE* f_;
};

// One case read back from a trace.
struct TraceCase {
    Case c;                // id, suite, kind, expected, choices (the prompt is the user message)
    std::string status;    // as traced ("PASSED", ...)
    std::string picked;
    bool thinking = false;
    std::string output;
    std::map<std::string, std::string> fields;  // every "key: value" line of the case
};

// Parses a trace; throws ds4::Error naming the line for a malformed one.
std::vector<TraceCase> parse_trace(std::string_view text);

// --regrade-trace: grades every traced case again with today's extractors, against the key of
// the same suite/id in `cases` when it is there (a corrected key shows) and the traced key
// otherwise. Only PASSED and FAILED cases are graded (STOPPED and ERROR ones hold partial or no
// output). Writes a line per case whose verdict or answer changed and a summary to `out`.
struct RegradeSummary {
    int total = 0, passed = 0, failed = 0, changed = 0, not_graded = 0;
};
RegradeSummary regrade(const std::vector<TraceCase>& traced, const std::vector<Case>& cases, std::FILE* out);

}  // namespace ds4::eval
