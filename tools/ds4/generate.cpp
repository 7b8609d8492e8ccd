#include "generate.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "common/error.h"
#include "common/thread_count.h"
#include "engine/engine.h"
#include "model/context_check.h"
#include "model/model.h"
#include "pipeline/pipeline_model.h"
#include "tokenizer/tokenizer.h"
#include "tokens.h"
#include "turn.h"

namespace ds4::cli {

int resolved_threads(const Options& o) { return resolve_threads(o.threads); }

std::unique_ptr<model::Model> open_model(const Options& o, std::unique_ptr<streaming::Attachment>& st) {
    auto model = pipeline::open_model(o.model, {.threads = resolved_threads(o),
                                                .load = o.no_mmap ? gguf::File::Load::Copy : gguf::File::Load::Map,
                                                .stream_experts = o.streaming.enabled},
                                      o.dist);
    st = streaming::attach(*model, o.streaming,
                           streaming::reserved_bytes(*model, {.ctx = o.ctx, .qat = o.qat}, 1));
    return model;
}

sampling::SamplerParams sampler_params(const Options& o) {
    return {.temperature = o.temperature, .top_k = o.top_k, .top_p = o.top_p, .min_p = o.min_p,
            .seed = o.seed ? *o.seed
                           : (uint64_t(std::random_device{}()) << 32 | std::random_device{}())};
}

int run_generate(const Options& o) {
    const std::string user = read_prompt(o);
    std::unique_ptr<streaming::Attachment> st;
    auto model = open_model(o, st);
    model::check_trained_context(*model, o.ctx, "--ctx");
    const auto tok = tokenizer::Tokenizer::from_gguf(model->file());
    if (o.thinking == chat::ThinkingMode::Max &&
        chat::effective_thinking(o.thinking, o.ctx) != chat::ThinkingMode::Max)
        std::fprintf(stderr, "ds4: --think-max needs --ctx >= %lld; thinking as --think\n",
                     (long long)chat::kThinkMaxMinContext);
    const auto format = chat::ChatFormat::from_gguf(model->file(), *tok);
    const std::vector<int32_t> prompt = one_turn_tokens(*format, one_turn(o, user));
    if (int64_t(prompt.size()) >= o.ctx)
        fail("the prompt is {} tokens but the context holds {} (raise --ctx)", prompt.size(), o.ctx);

    engine::Engine e(*model, *tok, {.ctx = o.ctx, .prefill_chunk = o.prefill_chunk, .qat = o.qat});
    TurnOptions t;
    t.format = format.get();
    t.sampling = sampler_params(o);
    if (o.n_given) t.max_tokens = o.n_predict;
    t.thinking = format->effective_thinking(o.thinking, o.ctx) != chat::ThinkingMode::Off;
    t.progress = isatty(STDERR_FILENO) != 0;
    const TurnResult r = run_turn(e, prompt, t);
    if (r.generation.reason == engine::StopReason::ContextFull)
        std::fprintf(stderr, "ds4: the context is full (%lld tokens); stopped\n", (long long)o.ctx);
    print_speed(r);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

}  // namespace ds4::cli
