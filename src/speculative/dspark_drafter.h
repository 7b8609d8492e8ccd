// The DSpark drafter (docs/SPECULATIVE.md, "DSpark"): an engine::Drafter over a DeepSeek V4
// DSpark head that mirrors one sequence. It reads the target layers' states of every row the
// sequence commits (the last window + 1 of a prompt), keeps the head's context rows in step
// (a rewind truncates them), and proposes one block per step:
//
//   auto head = deepseek4::DsparkHead::open(trunk, "dspark.gguf");
//   speculative::DsparkDrafter d(*head, {.threshold = 0.7f});
//   generator.set_drafter(&d);                  // before the prompt is evaluated
//   generator.begin({..., .max_draft = 4});
//
// The block sits at the last committed position p (the sequence holds x_0 … x_p, `next` is
// the target's token for p+1). Its row 0 predicts p+1: when it is not `next` the block is
// wrong from the start and nothing is proposed; otherwise rows 1 … cut-1 are the drafts.
// Drafts are the chain's argmaxes (Draft::probs empty: point masses), so verification stays
// exact at any temperature; upstream uses DSpark at temperature 0 only.
#pragma once

#include <cstdint>
#include <span>

#include "engine/generator.h"
#include "model/deepseek4/dspark.h"

namespace ds4::speculative {

struct DsparkDrafterOptions {
    // A block is cut before its first row with confidence below this (0: whole blocks).
    float threshold = 0.7f;
    bool qat = true;  // the FP8 round trip of the context KV rows (the sequence's qat)
};

struct DsparkStats {
    int64_t blocks = 0;     // blocks drafted
    int64_t mismatch = 0;   // of those, row 0 was not the target's next token
    int64_t drafted = 0;    // tokens proposed
    int64_t missing = 0;    // propose() without the context row of the last position
};

class DsparkDrafter final : public engine::Drafter {
public:
    explicit DsparkDrafter(deepseek4::DsparkHead& head, DsparkDrafterOptions opt = {});

    engine::DraftNeeds needs() const override;
    void commit(int64_t pos, std::span<const int32_t> tokens, const float* hidden, const float* captured) override;
    engine::Draft propose(std::span<const int32_t> history, int32_t next, int max) override;
    // The context rows (DsparkHead::save_context), saved and restored with the sequence.
    std::string state_kind() const override { return "dspark"; }
    std::vector<uint8_t> save_state() const override { return head_.save_context(ctx_); }
    bool restore(std::span<const uint8_t> bytes, std::span<const int32_t> tokens) override {
        return head_.load_context(ctx_, bytes, int64_t(tokens.size()));
    }

    const DsparkStats& stats() const { return stats_; }
    const deepseek4::DsparkContext& context() const { return ctx_; }

private:
    deepseek4::DsparkHead& head_;
    DsparkDrafterOptions opt_;
    deepseek4::DsparkContext ctx_;
    DsparkStats stats_;
};

}  // namespace ds4::speculative
