#include "generate.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "common/error.h"
#include "diagnostics.h"
#include "engine/engine.h"
#include "model/model.h"
#include "frontend/startup.h"
#include "speculative/options.h"
#include "tokenizer/tokenizer.h"
#include "tokens.h"
#include "turn.h"

namespace ds4::cli {

sampling::SamplerParams sampler_params(const Options& o, const chat::SamplingDefaults& defaults) {
    return {.temperature = o.temperature.value_or(defaults.temperature), .top_k = o.top_k,
            .top_p = o.top_p.value_or(defaults.top_p), .min_p = o.min_p.value_or(defaults.min_p),
            .seed = o.seed ? *o.seed
                           : (uint64_t(std::random_device{}()) << 32 | std::random_device{}())};
}

int run_generate(const Options& o) {
    const std::string user = read_prompt(o);
    const frontend::Started run = frontend::start_model(o, {.tokenizer = true});
    model::Model& model = *run.model;
    const tokenizer::Tokenizer& tok = *run.tokenizer;
    const auto format = chat::ChatFormat::from_gguf(model.file(), tok);
    if (o.thinking == chat::ThinkingMode::Max &&
        format->effective_thinking(o.thinking, o.ctx) != chat::ThinkingMode::Max)
        std::fprintf(stderr, "ds4: --think-max needs --ctx >= %lld; thinking as --think\n",
                     (long long)chat::kThinkMaxMinContext);
    const std::vector<int32_t> prompt = prompt_ids(o, *format, user);
    if (int64_t(prompt.size()) >= o.ctx)
        fail("the prompt is {} tokens but the context holds {} (raise --ctx)", prompt.size(), o.ctx);

    engine::Engine e(model, tok, {.ctx = o.ctx, .prefill_chunk = o.prefill_chunk, .qat = o.qat}, format->stop_ids());
    TurnOptions t;
    const std::unique_ptr<speculative::Speculation> spec = speculative::Speculation::open(model, o.spec);
    std::unique_ptr<engine::Drafter> drafter;
    if (spec) {
        std::fprintf(stderr, "ds4: speculative decoding: %s\n", spec->describe().c_str());
        drafter = spec->new_drafter(o.sequence());
        e.set_drafter(drafter.get());
        t.max_draft = spec->max_draft();
    }
    t.format = format.get();
    t.sampling = sampler_params(o, format->sampling_defaults());
    if (o.n_given) t.max_tokens = o.n_predict;
    t.thinking = prompt_opens_thinking(o, *format, user);
    t.power = o.power;
    t.progress = isatty(STDERR_FILENO) != 0;
    const TurnResult r = run_turn(e, prompt, t);
    if (r.generation.reason == engine::StopReason::ContextFull)
        std::fprintf(stderr, "ds4: the context is full (%lld tokens); stopped\n", (long long)o.ctx);
    print_speed(r);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace ds4::cli
