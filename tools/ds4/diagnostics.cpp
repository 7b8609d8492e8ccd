#include "diagnostics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/file_io.h"
#include "frontend/startup.h"
#include "gguf/tensor_type.h"
#include "model/session.h"
#include "prompt.h"
#include "tokenizer/tokenizer.h"
#include "tokens.h"

namespace ds4::cli {
namespace {

int32_t argmax(const float* v, int64_t n) { return int32_t(std::max_element(v, v + n) - v); }

// Upstream's "quant_bits": whole bits per weight of the routed experts (0: no routed experts).
int quant_bits(const gguf::File& f) {
    for (const gguf::TensorInfo& t : f.tensors())
        if (t.name.find("ffn_down_exps") != std::string::npos) return int(row_bytes(t.type, 256) * 8 / 256);
    return 0;
}

std::string number(float v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

}  // namespace

void add_diagnostic_flags(CLI::App& app, Options& o) {
    app.add_option("--dump-logits", o.dump_logits_json,
                   "With -p / --prompt-file: write the next-token logits as JSON (upstream's shape), "
                   "then exit")
        ->option_text("FILE")->group("Diagnostics");
    app.add_option("--decode-consistency", o.decode_consistency,
                   "With -p: decode N greedy tokens, compare their logits with one fresh prefill, then exit")
        ->check(CLI::Range(1, 1 << 20))->option_text("N")->group("Diagnostics");
    app.add_flag("--dist-replay-check", o.replay_check,
                 "With -p: evaluate the prompt, reset the session (on every pipeline hop too), "
                 "evaluate it again and compare the logits, then exit")
        ->group("Diagnostics");
    app.add_flag("--raw-prompt", o.raw_prompt,
                 "The prompt is the model input as it is: no chat template, no BOS; marker text is "
                 "matched (a pre-rendered prompt)")
        ->group("Prompt and sampling");
    app.add_option("--power", o.power, "Duty cycle 1..100: sleep between tokens (default 100; output unchanged)")
        ->check(CLI::Range(1, 100))->option_text("N")->group("Model and runtime");
}

std::vector<int32_t> prompt_ids(const Options& o, const chat::ChatFormat& format, const std::string& text) {
    if (o.raw_prompt) return format.tokenizer().encode(text, tokenizer::Special::Match);
    return one_turn_tokens(format, one_turn(o, text));
}

bool prompt_opens_thinking(const Options& o, const chat::ChatFormat& format, const std::string& text) {
    if (!o.raw_prompt) return format.effective_thinking(o.thinking, o.ctx) != chat::ThinkingMode::Off;
    const std::string_view t = text;
    return t.size() >= 7 && t.substr(t.size() - 7) == "<think>";
}

int run_dump_logits(const Options& o) {
    const std::string text = read_prompt(o);
    const frontend::Started run = frontend::start_model(o, {.tokenizer = true});
    const auto format = chat::ChatFormat::from_gguf(run.model->file(), *run.tokenizer);
    const std::vector<int32_t> ids = prompt_ids(o, *format, text);
    if (ids.empty()) fail("--dump-logits: the prompt is empty");
    if (int64_t(ids.size()) >= run.ctx) fail("the prompt is {} tokens but the context holds {} (raise --ctx)", ids.size(), run.ctx);
    model::Session s(*run.model, o.session());
    std::vector<float> logits;
    s.eval(ids, &logits);
    const int64_t V = int64_t(logits.size());
    const int32_t top = argmax(logits.data(), V);
    const std::string& bytes = run.tokenizer->token_bytes(top);
    nlohmann::json tok = {{"id", top}, {"text", bytes}, {"bytes", nlohmann::json::array()}};
    for (unsigned char c : bytes) tok["bytes"].push_back(int(c));
    std::string out = "{\n";
    out += fmt::format("  \"source\":\"ds4\",\n  \"model\":{},\n  \"backend\":\"cpu\",\n  \"quant_bits\":{},\n",
                       nlohmann::json(o.model).dump(), quant_bits(run.model->file()));
    out += fmt::format("  \"prompt_tokens\":{},\n  \"ctx\":{},\n  \"vocab\":{},\n", ids.size(), run.ctx, V);
    out += fmt::format("  \"argmax_token\":{},\n  \"argmax_logit\":{},\n  \"logits\":[\n    ",
                       tok.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), number(logits[size_t(top)]));
    for (int64_t i = 0; i < V; ++i) {
        if (i) out += ',';
        out += number(logits[size_t(i)]);
    }
    out += "\n  ]\n}\n";
    try {
        write_file(o.dump_logits_json, out);
    } catch (const Error& e) {
        fail("--dump-logits {}", e.what());
    }
    std::fprintf(stderr, "ds4: %lld prompt tokens; next-token logits written to %s (argmax %d)\n",
                 (long long)ids.size(), o.dump_logits_json.c_str(), top);
    return 0;
}

int run_decode_consistency(const Options& o) {
    const std::string text = read_prompt(o);
    const frontend::Started run = frontend::start_model(o, {.tokenizer = true});
    const auto format = chat::ChatFormat::from_gguf(run.model->file(), *run.tokenizer);
    std::vector<int32_t> ids = prompt_ids(o, *format, text);
    const int64_t n = o.decode_consistency, P = int64_t(ids.size());
    if (P + n > run.ctx) fail("--decode-consistency: {} prompt + {} tokens do not fit --ctx {}", P, n, run.ctx);
    // Decode: the prompt, then one token per call; row i predicts generated token i.
    model::Session dec(*run.model, o.session());
    std::vector<float> logits, rows;
    dec.eval(ids, &logits);
    const int64_t V = int64_t(logits.size());
    for (int64_t i = 0; i < n; ++i) {
        rows.insert(rows.end(), logits.begin(), logits.end());
        ids.push_back(argmax(logits.data(), V));
        if (i + 1 < n) dec.eval({ids.back()}, &logits);
    }
    ids.pop_back();  // the last sample is never evaluated
    // Prefill: the same tokens at once, every row's logits.
    model::Session pre(*run.model, o.session());
    std::vector<float> all;
    pre.eval(ids, &all, true);
    double worst = 0;
    int64_t worst_at = 0, differ = 0;
    for (int64_t i = 0; i < n; ++i) {
        const float* a = rows.data() + i * V;
        const float* b = all.data() + (P - 1 + i) * V;
        for (int64_t v = 0; v < V; ++v)
            if (double d = std::abs(double(a[v]) - double(b[v])); d > worst || std::isnan(d)) {
                worst = std::isnan(d) ? INFINITY : d;
                worst_at = i;
            }
        if (argmax(a, V) != argmax(b, V)) ++differ;
    }
    std::printf("decode-consistency: %lld prompt tokens, %lld decoded; max |decode - prefill| = %.9g (step %lld); "
                "argmax differs at %lld of %lld steps\n",
                (long long)P, (long long)n, worst, (long long)worst_at, (long long)differ, (long long)n);
    return differ == 0 ? 0 : 1;
}

int run_replay_check(const Options& o) {
    const std::string text = read_prompt(o);
    const frontend::Started run = frontend::start_model(o, {.tokenizer = true});
    const auto format = chat::ChatFormat::from_gguf(run.model->file(), *run.tokenizer);
    const std::vector<int32_t> ids = prompt_ids(o, *format, text);
    if (ids.empty()) fail("--dist-replay-check: the prompt is empty");
    if (int64_t(ids.size()) >= run.ctx)
        fail("the prompt is {} tokens but the context holds {} (raise --ctx)", ids.size(), run.ctx);
    model::Session s(*run.model, o.session());
    std::vector<float> first, replay;
    s.eval(ids, &first);
    s.reset();  // a pipeline coordinator clears every hop's sequence
    s.eval(ids, &replay);
    const int64_t V = int64_t(first.size());
    double worst = 0;
    for (int64_t v = 0; v < V; ++v)
        if (double d = std::abs(double(first[size_t(v)]) - double(replay[size_t(v)])); d > worst || std::isnan(d))
            worst = std::isnan(d) ? INFINITY : d;
    const int32_t a = argmax(first.data(), V), b = argmax(replay.data(), V);
    std::printf("dist-replay-check: %lld prompt tokens%s; max |first - replay| = %.9g; argmax %d, replay %d\n",
                (long long)ids.size(), o.dist.role == pipeline::Role::coordinator ? " over the pipeline" : "", worst,
                a, b);
    return a == b ? 0 : 1;
}

std::string take_help_topic(std::vector<std::string>& args) {
    for (size_t i = 1; i + 1 < args.size(); ++i) {
        if (args[i] == "--") break;
        if ((args[i] == "--help" || args[i] == "-h") && !args[i + 1].empty() && args[i + 1][0] != '-') {
            std::string topic = args[i + 1];
            args.erase(args.begin() + int64_t(i) + 1);
            return topic;
        }
    }
    return {};
}

void print_help_topic(CLI::App& app, const std::string& topic, const char* commands_help) {
    static const std::map<std::string, std::vector<std::string>> groups = {
        {"runtime", {"Options", "Model and runtime", "Evaluation", "SSD streaming", "Speculative decoding"}},
        {"sampling", {"Options", "Prompt and sampling"}},
        {"diagnostics", {"Diagnostics", "Evaluation"}},
        {"steering", {"Steering"}},
        {"distributed", {"Distributed"}},
    };
    if (topic == "commands") {
        std::fputs(commands_help, stdout);
        return;
    }
    const auto it = groups.find(topic);
    if (topic != "all" && it == groups.end())
        std::fprintf(stderr, "ds4: no help topic '%s' (runtime, sampling, diagnostics, steering, distributed, "
                             "commands, all); the whole help follows\n", topic.c_str());
    if (it != groups.end()) {
        for (CLI::Option* opt : app.get_options())
            if (std::find(it->second.begin(), it->second.end(), opt->get_group()) == it->second.end() &&
                opt != app.get_help_ptr())
                opt->group("");  // hidden
        app.footer("");
    }
    std::fputs(app.help().c_str(), stdout);
}

}  // namespace ds4::cli
