// The MTP drafter (docs/SPECULATIVE.md, "MTP"): an engine::Drafter over a DeepSeek V4 MTP head
// that mirrors one sequence. It reads the hidden state of every row the sequence commits, keeps
// the head's own raw-window state in step with it, and drafts recursively: the first draft
// from the row (h_p, next), each further one from the head's own output and the previous draft.
//
//   deepseek4::MtpHead head = *deepseek4::MtpHead::open(trunk, "mtp.gguf");
//   speculative::MtpDrafter d(head, seq.options(), {.margin = 3});
//   generator.set_drafter(&d);                  // before the prompt is evaluated
//   generator.begin({..., .max_draft = 2});
//
// Only the head's window matters to a draft (its attention is a raw window of n_swa rows), so
// the drafter reads the last n_swa + 1 rows of a prompt and restarts its state, at any gap or
// rewind it cannot follow, from the rows it holds. Positions in the head's own sequence are the
// target's minus an offset: rope scores depend on distances only.
#pragma once

#include <cstdint>
#include <memory>
#include <algorithm>
#include <optional>
#include <span>
#include <vector>

#include "engine/generator.h"
#include "model/deepseek4/mtp.h"
#include "model/glm/mtp.h"
#include "model/model.h"
#include "sampling/sampler.h"

namespace ds4::speculative {

// What the drafter needs of a family's MTP head (the adapters below): rows pairing h_{p-1}
// with x_p, recursive rows fed the head's own output.
class MtpHeadView {
public:
    virtual ~MtpHeadView() = default;
    virtual int64_t width() const = 0;  // floats of an h row
    virtual int64_t vocab() const = 0;
    // Rows of history a draft row sees (DeepSeek V4: the head's raw window; GLM: every row of
    // the context, `ctx`).
    virtual int64_t window(int64_t ctx) const = 0;
    virtual std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& opt) const = 0;
    // The h rows of the trunk's committed rows X [n][hidden_size] (what BatchItem::hidden gives).
    virtual void trunk_rows(const float* X, int64_t n, float* out) const = 0;
    virtual void eval(model::Sequence& seq, std::span<const int32_t> tokens, const float* h, float* out_hidden,
                      float* logits, model::Logits want) = 0;
};

// DeepSeek V4's head (the trunk's HC state as h).
class Deepseek4MtpView final : public MtpHeadView {
public:
    explicit Deepseek4MtpView(deepseek4::MtpHead& h) : h_(h) {}
    int64_t width() const override { return int64_t(h_.trunk().config().hc) * h_.trunk().config().n_embd; }
    int64_t vocab() const override { return h_.trunk().config().n_vocab; }
    int64_t window(int64_t) const override { return h_.trunk().config().window; }
    std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& o) const override {
        return h_.new_sequence(o);
    }
    void trunk_rows(const float* X, int64_t n, float* out) const override {
        std::copy(X, X + n * width(), out);
    }
    void eval(model::Sequence& seq, std::span<const int32_t> t, const float* h, float* y, float* l,
              model::Logits want) override {
        h_.eval(seq, t, h, y, l, want);
    }

private:
    deepseek4::MtpHead& h_;
};

// GLM 5.2's embedded block (the trunk's output-normed state as h; full attention).
class GlmMtpView final : public MtpHeadView {
public:
    explicit GlmMtpView(glm::MtpHead& h) : h_(h) {}
    int64_t width() const override { return h_.trunk().config().n_embd; }
    int64_t vocab() const override { return h_.trunk().config().n_vocab; }
    int64_t window(int64_t ctx) const override { return ctx; }
    std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& o) const override {
        return h_.new_sequence(o);
    }
    void trunk_rows(const float* X, int64_t n, float* out) const override { h_.trunk_rows(X, n, out); }
    void eval(model::Sequence& seq, std::span<const int32_t> t, const float* h, float* y, float* l,
              model::Logits want) override {
        h_.eval(seq, t, h, y, l, want);
    }

private:
    glm::MtpHead& h_;
};

struct MtpDrafterOptions {
    // At temperature 0, drafting stops at a draft whose top-1 minus top-2 logit is below this
    // (0: never): an unsure head wastes the verification rows (upstream's --mtp-margin).
    float margin = 3.0f;
};

// What a drafter did, for --mtp-timing style reports and tests.
struct DrafterStats {
    int64_t proposals = 0;  // propose() calls that returned tokens
    int64_t drafted = 0;    // tokens proposed
    int64_t cut = 0;        // proposals stopped early by the margin
    int64_t head_rows = 0;  // rows the head evaluated (catch-up and drafts)
    int64_t restarts = 0;   // state rebuilt from the held rows (a gap or a far rewind)
};

class MtpDrafter final : public engine::Drafter {
public:
    // `seq` gives the context and rewind slack of the target sequence it mirrors.
    MtpDrafter(MtpHeadView& head, const model::SequenceOptions& seq, MtpDrafterOptions opt = {});
    // Over a DeepSeek V4 head (its view owned by the drafter).
    MtpDrafter(deepseek4::MtpHead& head, const model::SequenceOptions& seq, MtpDrafterOptions opt = {});

    engine::DraftNeeds needs() const override { return {.hidden = true, .capture = {}, .tail = window_ + 1}; }
    void begin(const sampling::SamplerParams& p) override;
    void commit(int64_t pos, std::span<const int32_t> tokens, const float* hidden, const float* captured) override;
    engine::Draft propose(std::span<const int32_t> history, int32_t next, int max) override;
    // The held rows (the last window + 1 committed tokens and the trunk's hidden states: all a
    // draft reads; the head's own rows are made again from them), saved and restored with the
    // sequence (docs/STATE_FORMAT.md, "Drafter section").
    std::string state_kind() const override { return "mtp"; }
    std::vector<uint8_t> save_state() const override;
    bool restore(std::span<const uint8_t> bytes, std::span<const int32_t> tokens) override;

    const DrafterStats& stats() const { return stats_; }

private:
    int64_t held_end() const { return hpos_ + int64_t(htok_.size()); }
    int64_t head_end() const { return off_ + seq_->pos(); }
    void init(const model::SequenceOptions& seq);
    void restart(int64_t at);
    int32_t choose(std::span<const float> logits, engine::Draft& d, bool& stop);

    std::unique_ptr<MtpHeadView> own_view_;
    MtpHeadView* head_;
    MtpDrafterOptions opt_;
    int64_t width_ = 0, vocab_ = 0, window_ = 0;
    std::unique_ptr<model::Sequence> seq_;  // the head's rows: target positions off_ ...
    int64_t off_ = 0;
    // Committed target rows still needed: tokens and hidden states of positions hpos_ ...
    int64_t hpos_ = 0;
    std::vector<int32_t> htok_;
    std::vector<float> hbuf_;
    sampling::SamplerParams sampling_{};
    std::optional<sampling::Sampler> sampler_;  // temperature > 0: drafts drawn from the head
    DrafterStats stats_;
};

}  // namespace ds4::speculative
