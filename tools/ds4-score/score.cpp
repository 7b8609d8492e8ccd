#include "score.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "chat/format.h"
#include "common/data_path.h"
#include "common/error.h"
#include "common/file_io.h"
#include "frontend/startup.h"
#include "gguf/reader.h"
#include "model/session.h"

namespace ds4::score {
namespace {

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> out;
    std::stringstream ss(line);
    for (std::string f; std::getline(ss, f, '\t');) out.push_back(f);
    return out;
}

std::string read_text(const std::string& path, const std::string& what) {
    std::ifstream in(path, std::ios::binary);
    if (!in) fail("{}: cannot read {}", path, what);
    return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Case {
    std::string id, prompt, continuation;
};

std::vector<Case> read_manifest(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("{}: cannot read the manifest", path);
    std::string line;
    if (!std::getline(in, line)) fail("{}: empty manifest (a header line names the columns)", path);
    // Upstream's header is a comment: "# id\tprompt_file\tcontinuation_file\tresponse_file".
    if (line.rfind("# ", 0) == 0) line.erase(0, 2);
    const auto header = split_tabs(line);
    auto column = [&](std::initializer_list<const char*> names) {
        for (const char* n : names)
            for (size_t i = 0; i < header.size(); ++i)
                if (header[i] == n) return i;
        fail("{}: the header has no column {} ({})", path, *names.begin(), line);
    };
    const size_t ci = column({"id", "case"}), cp = column({"prompt_file", "prompt"});
    const size_t cc = column({"continuation_file", "continuation"});
    std::vector<Case> cases;
    for (int n = 2; std::getline(in, line); ++n) {
        if (line.empty() || line[0] == '#') continue;
        const auto f = split_tabs(line);
        if (f.size() <= std::max({ci, cp, cc})) fail("{}:{}: {} columns, the header has {}", path, n, f.size(), header.size());
        cases.push_back({f[ci], read_text(resolve_data_path(path, f[cp]), "the prompt of case " + f[ci]),
                         read_text(resolve_data_path(path, f[cc]), "the continuation of case " + f[ci])});
    }
    if (cases.empty()) fail("{}: no cases", path);
    return cases;
}

// Scores one case from the logits of prompt + continuation (rows n_prompt - 1 ...).
CaseScore score_logits(const std::string& id, const std::vector<float>& logits, int64_t V, int64_t n_prompt,
                       const std::vector<int32_t>& cont) {
    CaseScore s{id, int64_t(cont.size())};
    double nll = 0;
    int64_t top1 = 0;
    bool prefix = true;
    for (size_t j = 0; j < cont.size(); ++j) {
        const float* row = logits.data() + (n_prompt - 1 + int64_t(j)) * V;
        const float mx = *std::max_element(row, row + V);
        double sum = 0;
        for (int64_t v = 0; v < V; ++v) sum += std::exp(double(row[v]) - mx);
        nll += -(double(row[cont[j]]) - mx - std::log(sum));
        const bool hit = int32_t(std::max_element(row, row + V) - row) == cont[j];
        top1 += hit;
        if (j == 0) s.first_token_match = hit;
        prefix = prefix && hit;
        s.greedy_lcp += prefix;
    }
    s.avg_nll = cont.empty() ? 0 : nll / double(cont.size());
    s.top1_rate = cont.empty() ? 0 : double(top1) / double(cont.size());
    return s;
}

std::string format_scores(const std::vector<CaseScore>& scores) {
    std::string t = "id\ttokens\tavg_nll\tfirst_token_match\tgreedy_lcp\ttop1_rate\n";
    for (const auto& s : scores)
        t += fmt::format("{}\t{}\t{:.6f}\t{}\t{}\t{:.4f}\n", s.id, s.tokens, s.avg_nll, int(s.first_token_match),
                         s.greedy_lcp, s.top1_rate);
    return t;
}

}  // namespace

std::vector<CaseScore> score_manifest(const frontend::ModelOptions& o, const std::string& manifest,
                                      const std::string& out, std::FILE* log) {
    const std::vector<Case> cases = read_manifest(manifest);
    const frontend::Started run = frontend::start_model(o, {.tool = "ds4-score", .tokenizer = true});
    const auto file = gguf::File::open(o.model);
    const auto format = chat::ChatFormat::from_gguf(*file, *run.tokenizer);
    const int64_t V = run.model->info().n_vocab;
    model::Session s(*run.model, o.session());
    std::vector<CaseScore> scores;
    std::vector<float> logits;
    for (const Case& c : cases) {
        chat::RenderOptions ro;
        ro.thinking = chat::ThinkingMode::Off;
        ro.context_size = run.ctx;
        const std::vector<chat::Message> msgs = {{.role = chat::Role::User, .content = c.prompt}};
        std::vector<int32_t> ids = format->tokenize(format->render(msgs, ro));
        std::vector<int32_t> cont = run.tokenizer->encode(c.continuation);
        const int64_t n_prompt = int64_t(ids.size());
        if (n_prompt >= run.ctx) fail("{}: case {}: the prompt has {} tokens, --ctx is {}", manifest, c.id, n_prompt, run.ctx);
        if (n_prompt + int64_t(cont.size()) > run.ctx) cont.resize(size_t(run.ctx - n_prompt));
        ids.insert(ids.end(), cont.begin(), cont.end());
        s.reset();
        s.eval(ids, &logits, true);
        scores.push_back(score_logits(c.id, logits, V, n_prompt, cont));
        if (log) std::fprintf(log, "case %s: %lld tokens, avg_nll %.4f\n", c.id.c_str(), (long long)cont.size(), scores.back().avg_nll);
    }
    write_file(out, format_scores(scores));
    double mean = 0, lcp = 0;
    int first = 0;
    for (const auto& x : scores) mean += x.avg_nll, lcp += double(x.greedy_lcp), first += x.first_token_match;
    if (log)
        std::fprintf(log, "cases %zu  avg_nll %.6f  first_token_matches %d/%zu  avg_greedy_lcp %.3f\n", scores.size(),
                     mean / double(scores.size()), first, scores.size(), lcp / double(scores.size()));
    return scores;
}

std::vector<CaseScore> read_scores(const std::string& path) {
    std::ifstream in(path);
    if (!in) fail("{}: cannot read scores", path);
    std::string line;
    std::getline(in, line);
    if (line.rfind("id\ttokens\tavg_nll", 0) != 0) fail("{}: not a ds4-score file (header '{}')", path, line);
    std::vector<CaseScore> out;
    for (int n = 2; std::getline(in, line); ++n) {
        const auto f = split_tabs(line);
        if (f.size() < 6) fail("{}:{}: {} columns, expected 6", path, n, f.size());
        try {
            out.push_back({f[0], std::stoll(f[1]), std::stod(f[2]), f[3] == "1", std::stoll(f[4]), std::stod(f[5])});
        } catch (const std::exception&) {
            fail("{}:{}: malformed row '{}'", path, n, line);
        }
    }
    return out;
}

std::string compare_scores(const std::string& a_path, const std::string& b_path, std::FILE* out) {
    const auto a = read_scores(a_path), b = read_scores(b_path);
    std::map<std::string, const CaseScore*> by_id;
    for (const auto& x : a) by_id[x.id] = &x;
    int wins_a = 0, wins_b = 0, ties = 0, first_a = 0, first_b = 0, n = 0;
    double sum_a = 0, sum_b = 0, lcp_a = 0, lcp_b = 0;
    for (const auto& y : b) {
        const auto it = by_id.find(y.id);
        if (it == by_id.end()) continue;
        const CaseScore& x = *it->second;
        ++n;
        sum_a += x.avg_nll, sum_b += y.avg_nll, lcp_a += double(x.greedy_lcp), lcp_b += double(y.greedy_lcp);
        first_a += x.first_token_match, first_b += y.first_token_match;
        if (std::fabs(x.avg_nll - y.avg_nll) <= 1e-6) ++ties;
        else if (y.avg_nll < x.avg_nll) ++wins_b;
        else ++wins_a;
    }
    if (n == 0) fail("{} and {} share no case id", a_path, b_path);
    const double delta = (sum_b - sum_a) / n;
    // A verdict needs both the mean and the per-case wins to point the same way.
    const std::string verdict = delta < -0.01 && wins_b > wins_a ? "B better"
                                : delta > 0.01 && wins_a > wins_b ? "A better"
                                                                  : "no clear difference";
    std::fprintf(out, "cases %d\navg_nll A %.6f  B %.6f\ndelta_B_minus_A %+.6f\ncase_wins_B_A_ties %d/%d/%d\n"
                      "first_token_matches A %d  B %d\navg_greedy_lcp A %.3f  B %.3f\nverdict: %s\n",
                 n, sum_a / n, sum_b / n, delta, wins_b, wins_a, ties, first_a, first_b, lcp_a / n, lcp_b / n,
                 verdict.c_str());
    return verdict;
}

}  // namespace ds4::score
