// The ds4 diagnostics (spec/PRODUCT.md §9.1; docs/UPSTREAM.md lists them beside upstream's):
//
//   --dump-logits FILE       the next-token logits after the prompt (-p / --prompt-file) as
//                            upstream's JSON: {"source", "model", "backend", "quant_bits",
//                            "prompt_tokens", "ctx", "vocab", "argmax_token": {"id", "text",
//                            "bytes"}, "argmax_logit", "logits": [...]} (non-finite: null)
//   --decode-consistency N   N greedy tokens decoded one at a time, then the same rows in one
//                            fresh prefill: the largest logit difference and the argmax
//                            disagreements (exit 1 when the argmax differs anywhere)
//   --dist-replay-check      the prompt evaluated, the session reset (every pipeline hop's KV
//                            too), the prompt evaluated again: the largest difference of the
//                            two next-token logit rows (exit 1 when the argmax differs); a
//                            worker that kept stale state or a lossy route shows here
//   --raw-prompt             the prompt is the model's input as it is: no template, no BOS;
//                            marker text becomes control tokens (a pre-rendered prompt)
//   --power N                1..100: a duty cycle, sleeping between tokens (output unchanged)
//   --help TOPIC             one section of the help: runtime, sampling, diagnostics, steering,
//                            distributed, commands, all
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "chat/format.h"
#include "options.h"

namespace ds4::cli {

void add_diagnostic_flags(CLI::App& app, Options& o);

// The prompt's ids: --raw-prompt's literal text, or the one-turn chat around it.
std::vector<int32_t> prompt_ids(const Options& o, const chat::ChatFormat& format, const std::string& text);
// Whether the reply to these ids starts inside reasoning (the prompt ends with <think>).
bool prompt_opens_thinking(const Options& o, const chat::ChatFormat& format, const std::string& text);

int run_dump_logits(const Options& o);
int run_decode_consistency(const Options& o);
int run_replay_check(const Options& o);

// `--help TOPIC` (or `-h TOPIC`): removes TOPIC from args and returns it ("" when absent).
std::string take_help_topic(std::vector<std::string>& args);
// Prints the help of `topic`'s groups (an unknown topic: a warning, then the whole help).
void print_help_topic(CLI::App& app, const std::string& topic, const char* commands_help);

}  // namespace ds4::cli
