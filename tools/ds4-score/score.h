// ds4-score's two halves: scoring a model on official continuations (teacher forcing), and
// comparing two score files.
//
// Manifest: a TSV with a header line naming its columns; `id` (or `case`), `prompt_file` (or
// `prompt`) and `continuation_file` (or `continuation`) are required, other columns are
// ignored; files are relative to the manifest's folder. Upstream's manifest.tsv
// (gguf-tools/quality-testing: a "# id\tprompt_file\tcontinuation_file\tresponse_file" comment
// header, paths relative to upstream's repository root) is read as it is: a "# " header names
// the columns, and paths resolve by common/data_path.h. Each case's prompt is rendered as one
// user message with the model's chat template (thinking off, generation prompt added), the
// continuation tokenized as plain text, and the model run once over both.
//
// Per case (out.tsv, one row each after a header):
//   id  tokens  avg_nll  first_token_match  greedy_lcp  top1_rate
// avg_nll: mean -log p(official token) over the continuation; first_token_match: the greedy
// (argmax) first token is the official one; greedy_lcp: how many leading official tokens the
// greedy continuation reproduces (with teacher forcing the context of position k is the greedy
// one as long as every earlier token matched, so one pass gives it); top1_rate: share of
// positions whose argmax is the official token.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "frontend/model_options.h"

namespace ds4::score {

struct CaseScore {
    std::string id;
    int64_t tokens = 0;
    double avg_nll = 0;
    bool first_token_match = false;
    int64_t greedy_lcp = 0;
    double top1_rate = 0;
};

// Scores every case of `manifest` with the model of `o`, writes `out` (temporary name, then
// renamed) and a summary to `log`. Throws ds4::Error naming the manifest line or file.
std::vector<CaseScore> score_manifest(const frontend::ModelOptions& o, const std::string& manifest,
                                      const std::string& out, std::FILE* log);

std::vector<CaseScore> read_scores(const std::string& path);
// Per-case wins (lower avg_nll; ties within 1e-6), mean avg_nll of each, the delta B - A, first
// token matches, mean greedy LCP, and a verdict, printed to `out`. Cases are matched by id;
// returns the verdict ("B better", "A better", "no clear difference").
std::string compare_scores(const std::string& a, const std::string& b, std::FILE* out);

}  // namespace ds4::score
