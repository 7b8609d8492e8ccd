#include "logprobs.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "common/cli_checks.h"
#include "common/error.h"
#include "common/file_io.h"
#include "diagnostics.h"
#include "frontend/startup.h"
#include "model/session.h"
#include "tokenizer/tokenizer.h"
#include "tokens.h"
#include "vectors.h"

namespace ds4::cli {
namespace {

// Upstream's perplexity prefix: tokens that are context only.
constexpr int64_t kPerplexityPrefix = 32;
// Rows of logits held at once while scoring a window (memory: rows x n_vocab floats).
constexpr int64_t kScoreRows = 256;

std::string token_json(const tokenizer::Tokenizer& tok, int32_t id) {
    const std::string& bytes = tok.token_bytes(id);
    nlohmann::ordered_json t = {{"id", id}, {"text", bytes}, {"bytes", nlohmann::ordered_json::array()}};
    for (unsigned char c : bytes) t["bytes"].push_back(int(c));
    return t.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// A JSON number, or null (JSON has no NaN or infinity).
std::string number(double v) { return std::isfinite(v) ? fmt::format("{:.9g}", v) : "null"; }

int run_dump_logprobs(const Options& o) {
    if (o.prompt.empty() && o.prompt_file.empty()) fail("--dump-logprobs needs -p TEXT or --prompt-file FILE");
    const std::string text = read_prompt(o);
    const frontend::Started run = frontend::start_model(o, {.tokenizer = true});
    const auto format = chat::ChatFormat::from_gguf(run.model->file(), *run.tokenizer);
    const std::vector<int32_t> ids = prompt_ids(o, *format, text);
    if (ids.empty()) fail("--dump-logprobs: the prompt is empty");
    if (int64_t(ids.size()) >= run.ctx) fail("the prompt is {} tokens but the context holds {} (raise --ctx)", ids.size(), run.ctx);
    model::Session s(*run.model, o.session());
    std::vector<float> logits;
    s.eval(ids, &logits);
    const int64_t V = int64_t(logits.size());
    const int k = o.logprob.top_k;
    // Upstream: at most ctx - prompt - 1 steps (every selected token but the last is evaluated).
    int64_t steps = run.ctx - int64_t(ids.size()) - 1;
    if (o.n_given) steps = std::min<int64_t>(steps, o.n_predict);
    std::string out = fmt::format("{{\n  \"source\":\"ds4\",\n  \"prompt_tokens\":{},\n  \"ctx\":{},\n  \"top_k\":{},\n  \"steps\":[\n",
                                  ids.size(), run.ctx, k);
    const auto& stops = format->stop_ids();
    int64_t n = 0;
    for (; n < steps; ++n) {
        const std::vector<TokenScore> top = top_logprobs(logits.data(), V, k);
        const int32_t token = top.front().id;
        if (n) out += ",\n";
        out += fmt::format("    {{\"step\":{},\"selected\":{},\"top_logprobs\":[", n, token_json(*run.tokenizer, token));
        for (size_t i = 0; i < top.size(); ++i)
            out += fmt::format("{}{{\"token\":{},\"logit\":{},\"logprob\":{}}}", i ? "," : "",
                               token_json(*run.tokenizer, top[i].id), number(top[i].logit), number(top[i].logprob));
        out += "]}";
        if (std::find(stops.begin(), stops.end(), token) != stops.end()) {
            ++n;
            break;
        }
        if (n + 1 < steps) s.eval({token}, &logits);
    }
    out += "\n  ]\n}\n";
    try {
        write_file(o.logprob.dump, out);
    } catch (const Error& e) {
        fail("--dump-logprobs {}", e.what());
    }
    std::fprintf(stderr, "ds4: %lld prompt tokens; %lld greedy steps with top-%d logprobs written to %s\n",
                 (long long)ids.size(), (long long)n, k, o.logprob.dump.c_str());
    return 0;
}

// Sum of -log p over tokens[from, to) of one window, evaluated from a fresh state over
// tokens[begin, to - 1).
double window_nll(model::Session& s, const std::vector<int32_t>& tokens, int64_t begin, int64_t from, int64_t to) {
    s.reset();
    double nll = 0;
    std::vector<float> logits;
    for (int64_t at = begin; at < to - 1; at += kScoreRows) {
        const int64_t end = std::min(at + kScoreRows, to - 1);
        s.eval(std::vector<int32_t>(tokens.begin() + at, tokens.begin() + end), &logits, true);
        const int64_t V = int64_t(logits.size()) / (end - at);
        for (int64_t p = at; p < end; ++p) {  // row p predicts token p + 1
            if (p + 1 < from) continue;
            const float* row = logits.data() + (p - at) * V;
            nll -= double(row[tokens[size_t(p + 1)]]) - log_sum_exp(row, V);
        }
    }
    return nll;
}

int run_perplexity_file(const Options& o) {
    std::string text;
    try {
        text = read_file(o.logprob.perplexity);
    } catch (const Error& e) {
        fail("--perplexity-file {}", e.what());
    }
    const frontend::Started run = frontend::start_model(o, {.tokenizer = true});
    const std::vector<int32_t> tokens = run.tokenizer->encode(text, tokenizer::Special::Plain);
    const int64_t N = int64_t(tokens.size()), P = kPerplexityPrefix;
    if (N <= P) fail("--perplexity-file needs more than {} tokens ({} has {})", P, o.logprob.perplexity, N);
    if (run.ctx <= P) fail("--perplexity-file needs --ctx above {}", P);
    int64_t scored = N - P;
    if (o.n_given && o.n_predict > 0) scored = std::min<int64_t>(scored, o.n_predict);
    model::SessionOptions so = o.session();
    so.ctx = run.ctx;
    model::Session s(*run.model, so);
    double nll = 0;
    int64_t windows = 0;
    const int64_t last = P + scored;  // one past the last scored token
    const bool tty = isatty(fileno(stderr));
    for (int64_t begin = 0; begin + P < last; begin += run.ctx - P, ++windows) {
        const int64_t to = std::min(begin + run.ctx, last);
        nll += window_nll(s, tokens, begin, begin + P, to);
        if (tty) std::fprintf(stderr, "ds4: perplexity scored %lld/%lld\r", (long long)(to - P), (long long)scored);
    }
    std::fprintf(stderr, "%sds4: %lld window(s) of --ctx %lld (the first %lld tokens of each are context only)\n",
                 tty ? "\n" : "", (long long)windows, (long long)run.ctx, (long long)P);
    const double avg = nll / double(scored);
    std::printf("tokens=%lld scored=%lld nll=%.9f avg_nll=%.9f ppl=%.9f\n", (long long)N, (long long)scored, nll, avg,
                std::exp(avg));
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace

double log_sum_exp(const float* logits, int64_t n) {
    const float mx = *std::max_element(logits, logits + n);
    double sum = 0;
    for (int64_t v = 0; v < n; ++v) sum += std::exp(double(logits[v]) - double(mx));
    return double(mx) + std::log(sum);
}

std::vector<TokenScore> top_logprobs(const float* logits, int64_t n, int k) {
    std::vector<int32_t> order(static_cast<size_t>(n));
    for (int64_t v = 0; v < n; ++v) order[size_t(v)] = int32_t(v);
    const auto better = [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    const size_t kk = std::min<size_t>(size_t(k), order.size());
    std::partial_sort(order.begin(), order.begin() + int64_t(kk), order.end(), better);
    const double lse = log_sum_exp(logits, n);
    std::vector<TokenScore> out;
    for (size_t i = 0; i < kk; ++i) out.push_back({order[i], logits[order[i]], double(logits[order[i]]) - lse});
    return out;
}

void add_logprob_flags(CLI::App& app, LogprobOptions& o) {
    app.add_option("--dump-logprobs", o.dump,
                   "With -p / --prompt-file: write the greedy continuation's top logprobs as JSON "
                   "(upstream's shape), then exit")
        ->option_text("FILE")->group("Diagnostics");
    app.add_option("--logprobs-top-k", o.top_k, "Alternatives per step of --dump-logprobs / --logprob-vectors (default 20)")
        ->check(CLI::Range(1, 128))->option_text("N")->group("Diagnostics");
    app.add_option("--perplexity-file", o.perplexity,
                   "Teacher-forced NLL and perplexity of FILE's text (windows of --ctx), then exit")
        ->option_text("FILE")->group("Diagnostics");
    app.add_option("--logprob-vectors", o.vectors,
                   "Check the model against official top-logprob vectors (official.vec), then exit "
                   "(1 when a case fails)")
        ->option_text("FILE")->group("Diagnostics");
    app.add_option("--logprob-vectors-max-delta", o.max_delta,
                   "Largest |local - official| logprob a --logprob-vectors step accepts (default 4)")
        ->check(CLI::PositiveNumber)->option_text("NATS")->group("Diagnostics");
}

int run_logprob_mode(const Options& o) {
    if (int(!o.logprob.vectors.empty()) + int(!o.logprob.perplexity.empty()) + int(!o.logprob.dump.empty()) > 1)
        fail("--logprob-vectors, --perplexity-file and --dump-logprobs are separate runs: give one");
    if (!o.logprob.vectors.empty()) return run_logprob_vectors(o);
    if (!o.logprob.perplexity.empty()) return run_perplexity_file(o);
    return run_dump_logprobs(o);
}

}  // namespace ds4::cli
