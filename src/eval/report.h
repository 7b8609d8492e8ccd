// ds4-eval's final report (docs/EVAL.md, "Report"): a table of every selected case (state,
// prompt and generated tokens, how the reasoning closed, the answer given and the right one)
// with totals, as text and, for --json-report, as JSON.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "eval/cases.h"
#include "eval/runner.h"

namespace ds4::eval {

struct Totals {
    int cases = 0, run = 0, passed = 0, failed = 0, stopped = 0, errors = 0, pending = 0;
    int64_t prompt_tokens = 0, generated = 0;
    double seconds = 0;
};
Totals totals(const std::vector<Outcome>& outcomes);

// `outcomes[i]` belongs to `cases[i]` (Status::Pending: not run).
void print_report(std::FILE* f, const std::vector<Case>& cases, const std::vector<Outcome>& outcomes);
std::string json_report(const std::vector<Case>& cases, const std::vector<Outcome>& outcomes,
                        const std::vector<std::pair<std::string, std::string>>& run_info);

}  // namespace ds4::eval
