// ds4-score: how well a model fits official greedy continuations (teacher-forced NLL and
// greedy agreement), and a comparison of two such runs (docs/QUANTIZE.md, "Judging a file").
#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdio>
#include <string>

#include "common/version.h"
#include "common/error.h"
#include "frontend/model_options.h"
#include "score.h"

namespace {

constexpr const char* kFooter = R"(Usage:
  ds4-score MODEL manifest.tsv out.tsv [--ctx N] [model flags]
  ds4-score MODEL manifest.tsv out.tsv CTX     (upstream's score_official spelling)
  ds4-score --compare A.tsv B.tsv

The manifest is a TSV whose header names the columns id, prompt_file and continuation_file
(paths relative to the manifest); upstream's manifest.tsv ("# id ..." header, paths from
upstream's repository root) is read as it is, e.g. tests/data/quality-testing/flash/manifest.tsv.
Each prompt is rendered as one user turn with the model's chat template (thinking off); the
model is run once over prompt + continuation.
out.tsv: id, tokens, avg_nll (lower is better), first_token_match, greedy_lcp, top1_rate.
--compare prints per-case wins, the mean avg_nll of each, the delta B - A and a verdict.

Exit status: 0 done; 1 error; other (CLI11's codes): bad command line.)";

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"ds4-score: teacher-forced NLL of official continuations, and comparisons of two runs"};
    ds4::add_version_flag(app, "ds4-score");
    app.footer(kFooter);
    ds4::frontend::ModelOptions o;
    o.ctx = 4096;
    ds4::frontend::add_model_flags(app, o);
    std::vector<std::string> pos;
    std::vector<std::string> compare;
    app.add_option("args", pos, "MODEL manifest.tsv out.tsv [CTX]");
    app.add_option("--compare", compare, "A.tsv B.tsv: compare two score files")->expected(2);
    if (auto rc = ds4::frontend::parse(app, argc, argv, o)) return *rc;
    try {
        if (!compare.empty()) {
            ds4::score::compare_scores(compare[0], compare[1], stdout);
            return 0;
        }
        // Upstream's score_official takes the context as a fourth argument.
        if (pos.size() == 4) {
            const std::string& c = pos[3];
            const auto [end, ec] = std::from_chars(c.data(), c.data() + c.size(), o.ctx);
            if (ec != std::errc() || end != c.data() + c.size() || o.ctx < 2) ds4::fail("CTX '{}' is not a context size", c);
            o.ctx_given = true;
            pos.pop_back();
        }
        if (pos.size() == 3) o.model = pos[0];
        else if (!(pos.size() == 2 && o.model_given)) ds4::fail("expected MODEL manifest.tsv out.tsv (or --compare A B)");
        const std::string& manifest = pos[pos.size() - 2];
        ds4::score::score_manifest(o, manifest, pos.back(), stderr);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ds4-score: error: %s\n", e.what());
        return 1;
    }
    return 0;
}
