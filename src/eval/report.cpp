#include "eval/report.h"

#include <nlohmann/json.hpp>

namespace ds4::eval {

Totals totals(const std::vector<Outcome>& outcomes) {
    Totals t;
    for (const Outcome& o : outcomes) {
        ++t.cases;
        switch (o.status) {
            case Status::Passed: ++t.passed; break;
            case Status::Failed: ++t.failed; break;
            case Status::Stopped: ++t.stopped; break;
            case Status::Error: ++t.errors; break;
            case Status::Pending:
            case Status::Running: ++t.pending; continue;
        }
        ++t.run;
        t.prompt_tokens += o.prompt_tokens;
        t.generated += o.generated;
        t.seconds += o.seconds;
    }
    return t;
}

void print_report(std::FILE* f, const std::vector<Case>& cases, const std::vector<Outcome>& outcomes) {
    std::fprintf(f, "\n%4s  %-24s %-8s %8s %9s %-11s %s\n", "#", "case", "state", "prompt", "generated", "think_close",
                 "given/correct");
    for (size_t i = 0; i < cases.size(); ++i) {
        const Outcome& o = outcomes[i];
        const std::string name = cases[i].suite + "/" + cases[i].id;
        std::fprintf(f, "%4zu  %-24s %-8s %8lld %9lld %-11s %s/%s\n", i + 1, name.c_str(), to_string(o.status),
                     (long long)o.prompt_tokens, (long long)o.generated, to_string(o.close.kind),
                     o.status == Status::Pending ? "-" : o.picked.c_str(), cases[i].expected.c_str());
    }
    const Totals t = totals(outcomes);
    std::fprintf(f, "\npassed %d/%d (failed %d, stopped %d, errors %d, not run %d); %lld prompt tokens, %lld generated tokens, %.1f s",
                 t.passed, t.cases, t.failed, t.stopped, t.errors, t.pending, (long long)t.prompt_tokens,
                 (long long)t.generated, t.seconds);
    std::fprintf(f, t.seconds > 0 ? " (%.1f generated t/s)\n" : "\n", t.seconds > 0 ? double(t.generated) / t.seconds : 0.0);
}

std::string json_report(const std::vector<Case>& cases, const std::vector<Outcome>& outcomes,
                        const std::vector<std::pair<std::string, std::string>>& run_info) {
    nlohmann::json j;
    for (const auto& [k, v] : run_info) j["run"][k] = v;
    j["cases"] = nlohmann::json::array();
    for (size_t i = 0; i < cases.size(); ++i) {
        const Outcome& o = outcomes[i];
        nlohmann::json c = {{"index", i + 1},          {"suite", cases[i].suite},   {"id", cases[i].id},
                            {"kind", to_string(cases[i].kind)}, {"status", to_string(o.status)},
                            {"picked", o.picked},      {"expected", cases[i].expected},
                            {"prompt_tokens", o.prompt_tokens}, {"generated_tokens", o.generated},
                            {"seconds", o.seconds},   {"think_close", to_string(o.close.kind)}};
        if (o.status != Status::Pending) c["stop"] = engine::to_string(o.stop);
        if (!o.error.empty()) c["error"] = o.error;
        j["cases"].push_back(std::move(c));
    }
    const Totals t = totals(outcomes);
    j["totals"] = {{"cases", t.cases},     {"run", t.run},         {"passed", t.passed},
                   {"failed", t.failed},   {"stopped", t.stopped}, {"errors", t.errors},
                   {"not_run", t.pending}, {"prompt_tokens", t.prompt_tokens},
                   {"generated_tokens", t.generated}, {"seconds", t.seconds}};
    return j.dump(2) + "\n";
}

}  // namespace ds4::eval
