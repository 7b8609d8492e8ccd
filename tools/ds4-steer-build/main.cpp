// ds4-steer-build: builds a directional-steering file (docs/STEERING.md) from two prompt files.
// Each prompt (one per non-empty line; '#' lines are comments) is rendered as a one-turn chat
// and evaluated; the model's sublayer capture (model/steering.h) gives every layer's FFN (or
// attention) output at the prompt's last row. Per layer: the mean over the good prompts minus
// the mean over the bad ones, orthogonalised against the bad (control) mean, normalised.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

#include "common/version.h"
#include "chat/format.h"
#include "chat/message.h"
#include "common/error.h"
#include "common/file_io.h"
#include "frontend/run.h"
#include "frontend/startup.h"
#include "frontend/steering_options.h"
#include "model/session.h"
#include "model/steering.h"

namespace {

struct Options : ds4::frontend::ModelOptions {
    Options() { ctx = 4096; }
    std::string good, bad, out, component = "ffn", system = "You are a helpful assistant";
    bool think = false, no_orthogonalize = false;
};

std::vector<std::string> read_prompts(const std::string& path) {
    std::vector<std::string> out;
    const std::string text = ds4::read_file(path);
    size_t at = 0;
    while (at <= text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(at, end - at);
        at = end + 1;
        const size_t b = line.find_first_not_of(" \t\r"), e = line.find_last_not_of(" \t\r");
        if (b == std::string::npos || line[b] == '#') continue;
        out.push_back(line.substr(b, e - b + 1));
    }
    if (out.empty()) ds4::fail("{}: no prompts (one per line; '#' starts a comment)", path);
    return out;
}

// The captured component's rows of every prompt, summed: [n_layer][n_embd].
std::vector<double> sum_captures(ds4::model::Model& m, const ds4::chat::ChatFormat& format, const Options& o,
                                 const std::vector<std::string>& prompts) {
    const uint32_t L = m.info().n_layer;
    const int64_t D = m.info().n_embd;
    std::vector<double> sum(size_t(L) * size_t(D), 0.0);
    ds4::model::Session session(m, o.session());
    ds4::model::SublayerCapture cap;
    session.sequence().set_sublayer_capture(&cap);
    for (const std::string& p : prompts) {
        std::vector<ds4::chat::Message> messages(o.system.empty() ? 1 : 2);
        if (!o.system.empty()) {
            messages[0].role = ds4::chat::Role::System;
            messages[0].content = o.system;
        }
        messages.back().role = ds4::chat::Role::User;
        messages.back().content = p;
        ds4::chat::RenderOptions ro;
        ro.thinking = o.think ? ds4::chat::ThinkingMode::High : ds4::chat::ThinkingMode::Off;
        const std::vector<int32_t> ids = format.tokenize(format.render(messages, ro));
        if (int64_t(ids.size()) > o.ctx) ds4::fail("a prompt is {} tokens, the context {} (raise --ctx)", ids.size(), o.ctx);
        cap.reset(L, D);
        session.reset();
        session.eval(ids, nullptr);
        const std::vector<float>& rows = o.component == "ffn" ? cap.ffn : cap.attn;
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += double(rows[i]);
    }
    return sum;
}

int run(const Options& o) {
    const std::vector<std::string> good = read_prompts(o.good), bad = read_prompts(o.bad);
    ds4::frontend::Started started = ds4::frontend::start_model(o, {.tool = "ds4-steer-build", .tokenizer = true});
    ds4::model::Model& m = *started.model;
    const auto format = ds4::chat::ChatFormat::from_gguf(m.file(), *started.tokenizer);
    std::vector<double> g = sum_captures(m, *format, o, good), b = sum_captures(m, *format, o, bad);
    for (double& x : g) x /= double(good.size());
    for (double& x : b) x /= double(bad.size());
    const uint32_t L = m.info().n_layer;
    const int64_t D = m.info().n_embd;
    const std::vector<float> dirs = ds4::frontend::steering_direction(g, b, L, D, !o.no_orthogonalize);
    const std::string extra = fmt::format(
        R"({{"component": "{}_out", "thinking": {}, "orthogonalize_control_mean": {}, "good_prompts": {}, )"
        R"("bad_prompts": {}, "note": "a positive scale suppresses this direction; a negative one amplifies it"}})",
        o.component, o.think, !o.no_orthogonalize, good.size(), bad.size());
    ds4::frontend::write_steering_file(o.out, dirs, L, D, extra);
    std::fprintf(stderr, "ds4-steer-build: %zu good, %zu bad prompts; wrote %s (%u x %lld f32) and %s\n", good.size(),
                 bad.size(), o.out.c_str(), L, (long long)D, ds4::frontend::steering_sidecar(o.out).c_str());
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    Options o;
    CLI::App app{"ds4-steer-build: a directional-steering file from two prompt files (docs/STEERING.md)",
                 "ds4-steer-build"};
    ds4::add_version_flag(app, "ds4-steer-build");
    ds4::frontend::add_model_flags(app, o);
    app.add_option("--good-file", o.good, "Target prompts, one per line (the direction points to them)")
        ->required()->check(CLI::ExistingFile)->option_text("FILE");
    app.add_option("--bad-file", o.bad, "Contrast (control) prompts, one per line")
        ->required()->check(CLI::ExistingFile)->option_text("FILE");
    app.add_option("-o,--out", o.out, "Output: raw f32 directions (the JSON sidecar goes beside it, .json)")
        ->required()->option_text("FILE.f32");
    app.add_option("--component", o.component, "Which output to capture: ffn (default) or attn")
        ->check(CLI::IsMember({"ffn", "attn"}));
    app.add_option("--system", o.system, "System prompt of every prompt (default \"You are a helpful assistant\")");
    app.add_flag("--think", o.think, "Capture after <think> (default: the no-thinking prompt)");
    app.add_flag("--no-orthogonalize", o.no_orthogonalize, "Keep the part along the control mean");
    if (const auto exit_code = ds4::frontend::parse(app, argc, argv, o)) return *exit_code;
    return ds4::frontend::run_main("ds4-steer-build", [&] { return run(o); });
}
