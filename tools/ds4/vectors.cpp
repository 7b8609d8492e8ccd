#include "vectors.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "common/error.h"
#include "common/file_io.h"
#include "frontend/startup.h"
#include "logprobs.h"
#include "model/session.h"
#include "prompt.h"
#include "tokenizer/tokenizer.h"

namespace ds4::cli {
namespace {

std::string printable(const std::string& bytes) {
    std::string s;
    for (unsigned char c : bytes) s += c >= 0x20 && c < 0x7f && c != '\\' ? std::string(1, char(c)) : fmt::format("\\x{:02x}", c);
    return s;
}

// What one case measured.
struct CaseResult {
    int steps = 0, selected_ok = 0, tops = 0, tops_found = 0, tops_close = 0;
    double max_delta = 0, sum_delta = 0;
    std::string first_failure;
    bool pass() const { return first_failure.empty(); }
};

CaseResult check_case(const VectorCase& c, const Options& o, const frontend::Started& run, const chat::ChatFormat& format,
                      const std::unordered_map<std::string, int32_t>& by_bytes) {
    std::string text;
    try {
        text = read_file(c.prompt_file);
    } catch (const Error& e) {
        fail("--logprob-vectors: case {}: {}", c.id, e.what());
    }
    model::SessionOptions so = o.session();
    so.ctx = o.ctx_given ? run.ctx : std::min(c.ctx, run.ctx);
    // Upstream's prompt: no system message, thinking off.
    const std::vector<int32_t> ids = one_turn_tokens(format, {.system = "", .user = text, .thinking = chat::ThinkingMode::Off,
                                                               .context_size = so.ctx});
    if (int64_t(ids.size() + c.steps.size()) > so.ctx)
        fail("--logprob-vectors: case {}: {} prompt tokens + {} steps do not fit the context {}", c.id, ids.size(), c.steps.size(), so.ctx);
    model::Session s(*run.model, so);
    std::vector<float> logits;
    s.eval(ids, &logits);
    const int64_t V = int64_t(logits.size());
    CaseResult r;
    auto failure = [&](std::string what) {
        if (r.first_failure.empty()) r.first_failure = std::move(what);
    };
    for (size_t i = 0; i < c.steps.size(); ++i) {
        const VectorStep& st = c.steps[i];
        const auto sel = by_bytes.find(st.selected);
        if (sel == by_bytes.end())
            fail("--logprob-vectors: case {} step {}: the official token '{}' is no token of this vocabulary", c.id, i, printable(st.selected));
        const std::vector<TokenScore> top = top_logprobs(logits.data(), V, o.logprob.top_k);
        ++r.steps;
        if (top.front().id == sel->second) ++r.selected_ok;
        else failure(fmt::format("step {}: argmax '{}', official '{}'", i, printable(run.tokenizer->token_bytes(top.front().id)),
                                 printable(st.selected)));
        for (const VectorTop& t : st.top) {
            ++r.tops;
            const auto it = std::find_if(top.begin(), top.end(),
                                         [&](const TokenScore& x) { return run.tokenizer->token_bytes(x.id) == t.bytes; });
            if (it == top.end()) {
                failure(fmt::format("step {}: official top token '{}' not in the local top {}", i, printable(t.bytes), top.size()));
                continue;
            }
            ++r.tops_found;
            const double d = std::fabs(it->logprob - t.logprob);
            r.max_delta = std::max(r.max_delta, d), r.sum_delta += d;
            if (d <= o.logprob.max_delta) ++r.tops_close;
            else failure(fmt::format("step {}: '{}' logprob {:.4f}, official {:.4f}", i, printable(t.bytes), it->logprob, t.logprob));
        }
        if (i + 1 < c.steps.size()) s.eval({sel->second}, &logits);  // teacher forcing
    }
    return r;
}

}  // namespace

int run_logprob_vectors(const Options& o) {
    const std::vector<VectorCase> cases = read_vectors(o.logprob.vectors);
    int64_t need = 0;
    for (const VectorCase& c : cases) need = std::max(need, c.ctx);
    Options mo = o;
    if (!o.ctx_given) mo.ctx = need;  // the model is opened for the largest case
    const frontend::Started run = frontend::start_model(mo, {.tokenizer = true});
    const auto format = chat::ChatFormat::from_gguf(run.model->file(), *run.tokenizer);
    std::unordered_map<std::string, int32_t> by_bytes;
    for (int32_t id = run.tokenizer->n_vocab() - 1; id >= 0; --id) by_bytes[run.tokenizer->token_bytes(id)] = id;  // lowest id wins
    int passed = 0;
    for (const VectorCase& c : cases) {
        const CaseResult r = check_case(c, mo, run, *format, by_bytes);
        passed += r.pass();
        std::printf("%s %s: steps %d, selected %d/%d, official top in local top-%d %d/%d, |dlogprob| <= %g %d/%d, "
                    "max %.4f mean %.4f%s%s\n",
                    r.pass() ? "PASS" : "FAIL", c.id.c_str(), r.steps, r.selected_ok, r.steps, o.logprob.top_k, r.tops_found,
                    r.tops, o.logprob.max_delta, r.tops_close, r.tops, r.max_delta, r.tops_found ? r.sum_delta / r.tops_found : 0.0,
                    r.pass() ? "" : "; first failure: ", r.first_failure.c_str());
    }
    std::printf("logprob-vectors: %zu cases, %d passed, %zu failed\n", cases.size(), passed, cases.size() - size_t(passed));
    std::fflush(stdout);
    return passed == int(cases.size()) ? 0 : 1;
}

}  // namespace ds4::cli
