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

#include "sampling/sampler.h"

namespace ds4::cli {
// Shared with the interactive chat: the sampler of the options (a random seed unless --seed);
// what the user did not set comes from the chat format's `defaults`.
sampling::SamplerParams sampler_params(const Options& o, const chat::SamplingDefaults& defaults);
}  // namespace ds4::cli
