#include "imatrix_cli.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "common/cli_checks.h"
#include "common/error.h"
#include "common/file_io.h"
#include "frontend/startup.h"
#include "model/session.h"
#include "options.h"

namespace ds4::cli {

void add_imatrix_flags(CLI::App& app, ImatrixOptions& o) {
    const char* g = "Diagnostics";
    app.add_option("--imatrix-dataset", o.dataset,
                   "Collect an importance matrix over the prompts of FILE (rendered chat text, split by "
                   "'===== DS4_IMATRIX_PROMPT' lines)")
        ->option_text("FILE")->group(g);
    app.add_option("--imatrix-out", o.out, "Write the collected imatrix as llama.cpp's legacy .dat to FILE")
        ->option_text("FILE")->group(g);
    app.add_option("--imatrix-max-prompts", o.max_prompts, "Stop the collection after N prompts (0: all)")
        ->check(cli_checks::at_least(0))->option_text("N")->group(g);
    app.add_option("--imatrix-max-tokens", o.max_tokens,
                   "Stop after N prompt tokens, the last prompt cut to fit (0: no limit)")
        ->check(cli_checks::at_least(0))->option_text("N")->group(g);
    app.add_option("--imatrix-min-expert-samples", o.min_expert_samples,
                   "Experts seen fewer than N times are written as 1s, no information (default 1)")
        ->check(cli_checks::at_least(1))->option_text("N")->group(g);
}

void ImatrixObserver::observe(const model::ExpertRows& r) {
    for (int64_t t = 0; t < r.n; ++t) {
        const float* x = r.input + t * r.n_embd;
        c_.count_token();
        for (int64_t k = 0; k < r.n_used; ++k) {
            const int64_t slot = t * r.n_used + k;
            c_.add_routed(r.layer, r.n_expert, r.chosen[slot], x, r.n_embd, r.hidden + slot * r.ff, r.ff,
                          r.weight[slot]);
        }
        if (r.shared_hidden) c_.add_shared(r.layer, x, r.n_embd, r.shared_hidden + t * r.ff_shared, r.ff_shared);
    }
}

int run_imatrix(const Options& o) {
    const ImatrixOptions& im = o.imatrix;
    if (im.dataset.empty() || im.out.empty())
        fail("--imatrix-dataset FILE and --imatrix-out FILE.dat go together");
    if (o.dist.role != pipeline::Role::none)
        fail("--imatrix-out collects on one machine: a pipeline process sees only its own layers "
             "(drop --role; --ssd-streaming runs a model larger than memory)");
    std::string text;
    try {
        text = read_file(im.dataset);
    } catch (const Error& e) {
        fail("--imatrix-dataset {}", e.what());
    }
    const std::vector<std::string> prompts = quantize::imatrix_prompts(text);
    if (prompts.empty()) fail("--imatrix-dataset {}: no prompts", im.dataset);

    const frontend::Started run = frontend::start_model(o, {.tool = "ds4", .tokenizer = true});
    model::Session s(*run.model, o.session());
    quantize::ImatrixCollector collector(im.min_expert_samples);
    ImatrixObserver observer(collector);
    s.sequence().set_expert_observer(&observer);
    std::fprintf(stderr, "ds4: collecting the imatrix from %s (%zu prompts, ctx %lld)\n", im.dataset.c_str(),
                 prompts.size(), static_cast<long long>(run.ctx));

    const auto t0 = std::chrono::steady_clock::now();
    int64_t done = 0, tokens = 0;
    for (const std::string& p : prompts) {
        if (im.max_prompts > 0 && done >= im.max_prompts) break;
        if (im.max_tokens > 0 && tokens >= im.max_tokens) break;
        std::vector<int32_t> ids = run.tokenizer->encode(p, tokenizer::Special::Match);
        int64_t keep = std::min<int64_t>(int64_t(ids.size()), run.ctx);
        if (im.max_tokens > 0) keep = std::min(keep, im.max_tokens - tokens);
        ids.resize(size_t(keep));
        if (ids.empty()) continue;
        s.reset();
        s.eval(ids, nullptr);
        ++done;
        tokens += keep;
        if (done % 10 == 0)
            std::fprintf(stderr, "ds4: imatrix prompts=%lld tokens=%lld routes=%lld\n", static_cast<long long>(done),
                         static_cast<long long>(tokens), static_cast<long long>(collector.routes()));
    }
    s.sequence().set_expert_observer(nullptr);
    collector.imatrix(im.dataset, int(done)).save_legacy(im.out);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "ds4: wrote imatrix %s from %lld prompts, %lld tokens, %lld routed expert observations "
                 "(%.1f s)\n", im.out.c_str(), static_cast<long long>(done), static_cast<long long>(tokens),
                 static_cast<long long>(collector.routes()), secs);
    return 0;
}

}  // namespace ds4::cli
