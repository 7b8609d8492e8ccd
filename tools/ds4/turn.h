// One chat turn of the ds4 CLI, shared by the one-shot mode (-p) and the interactive chat:
// sync the engine to the transcript (prefilling only what the live session lacks, with a
// progress line on a terminal), then sample and stream the reply through the output parser:
// content plain on stdout, reasoning too (dimmed on a terminal). The caller owns the
// transcript; the emitted ids are returned so it can append them.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "chat/format.h"
#include "engine/engine.h"

namespace ds4::cli {

struct TurnOptions {
    const chat::ChatFormat* format = nullptr;  // the model's text format: its reply parser
    sampling::SamplerParams sampling;
    int64_t max_tokens = INT64_MAX;
    bool thinking = true;                      // the prompt ends with <think>
    const std::atomic<bool>* cancel = nullptr; // Ctrl+C: stops the prefill or the generation
    bool progress = false;                     // show "prefill: done/total" on stderr
    int max_draft = 0;                         // speculative drafts per step (the engine's drafter)
    int power = 100;                           // --power: duty cycle, sleeping between tokens
};

struct TurnResult {
    engine::SyncResult prefill;
    engine::GenerateResult generation;
    std::vector<int32_t> emitted;
    engine::GeneratorUsage usage;              // drafts proposed and accepted
    bool prefill_done = false;  // false: cancelled during prefill, nothing was generated
};

// Throws ds4::Error (context exceeded, ...), leaving the engine consistent.
TurnResult run_turn(engine::Engine& e, const std::vector<int32_t>& transcript, const TurnOptions& o);

// "prefill: X t/s, generation: Y t/s" on stderr (and the drafts, when there were any).
void print_speed(const TurnResult& r);

}  // namespace ds4::cli
