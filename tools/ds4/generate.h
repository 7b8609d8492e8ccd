// ds4 -p TEXT / --prompt-file FILE: one-shot chat. Renders the one-turn prompt (prompt.h),
// prefills it, samples until EOS, -n tokens or a full context, and streams the decoded text
// through the output parser: content plain on stdout, reasoning too (dimmed when stdout is a
// terminal). Progress, warnings and the final "prefill: X t/s, generation: Y t/s" go to stderr,
// so with --nothink stdout carries exactly the generated text (plus a newline on a terminal).
#pragma once

#include "options.h"

namespace ds4::cli {

// Throws ds4::Error (missing model, prompt longer than the context, ...).
int run_generate(const Options& o);

}  // namespace ds4::cli

#include <random>

#include "model/model.h"
#include "sampling/sampler.h"
#include "streaming/options.h"

namespace ds4::cli {
// Opens -m with the options' threads, --no-mmap and --ssd-streaming, and sets up the streaming
// cache / expert profile (`st`, kept alive as long as the model runs) for contexts of --ctx.
std::unique_ptr<model::Model> open_model(const Options& o, std::unique_ptr<streaming::Attachment>& st);
// Shared with the interactive chat: --threads (0: all cores) and the sampler of the options
// (a random seed unless --seed).
int resolved_threads(const Options& o);
sampling::SamplerParams sampler_params(const Options& o);
}  // namespace ds4::cli
