// The generation state machine of one sequence, written once for every front end: the CLI
// (through Engine), the server's scheduler (many generators advanced by one batched
// Model::eval per step) and ds4-bench. It owns what a request does to a timeline: reusing the
// prefix the sequence already holds, the prompt still to evaluate, the pending token, the
// sampler, the stop rules (EOS, token limit, full context, cancellation, the caller's word),
// usage counts, and speculative verification (several tokens per step, rolled back to the
// accepted prefix). It never evaluates anything itself: the driver asks it for rows, evaluates
// them (alone or in a batch with other sequences' rows) and hands it back the logits.
//
//   Generator g(seq, {.n_vocab = V, .eos = eos});
//   g.set_prompt(prompt);                          // rewinds to the shared prefix
//   g.begin(opts);
//   for (;;) {
//       if (g.ready()) { if (auto stop = g.advance(on_token)) break; }
//       Rows r = g.next(chunk);                   // prompt piece, or pending + drafts
//       model.eval({&seq, r.tokens, r.want, r.logits});
//       g.evaluated();
//   }
//
// Verification (a Drafter in GenerateOptions): the pending token and up to max_draft proposed
// tokens are evaluated in one step with the logits of every row. advance() samples from row 0;
// while the sample equals the next draft the following row's logits are valid and it samples
// again; at the first difference the sequence is rewound to the accepted rows (O(1): within
// the sequence's rewind slack) and the last sample becomes the pending token. Each emitted
// token is sampled from the target's own distribution after exactly the accepted history, so
// the output is the one generation without drafts would give (up to the rounding differences
// between one-row and many-row evaluation).
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "model/model.h"
#include "sampling/sampler.h"

namespace ds4::engine {

enum class StopReason {
    Eos,          // the model produced end-of-sentence (not reported to on_token)
    Length,       // max_tokens emitted
    ContextFull,  // no room for another position
    Cancelled,    // *cancel became true
    Caller,       // on_token returned false
    ForcedEnd,    // the forced sequence was used up (test hook)
};
const char* to_string(StopReason r);

// What a drafter reads of the target's evaluation of the rows a sequence commits: their final
// hidden states (model::BatchItem::hidden) and the outputs of chosen layers (::capture); of a
// prompt only its last `tail` rows (0: all of them).
struct DraftNeeds {
    bool hidden = false;
    std::vector<uint32_t> capture;
    int64_t tail = 0;
};

struct Draft {
    std::vector<int32_t> tokens;
    // Empty: each token is the drafter's pick (a point mass). Otherwise [tokens.size()][n_vocab]:
    // the distribution q each token was drawn from; at temperature > 0 verification accepts a
    // draft d with probability min(1, p(d)/q(d)) and otherwise draws from norm(max(0, p - q))
    // (exact speculative sampling: the output keeps the target's distribution p).
    std::vector<float> probs;
};

// Proposes the tokens likely to follow a sequence (speculative decoding's draft source: MTP,
// DSpark, n-gram lookup, or a test's oracle).
class Drafter {
public:
    virtual ~Drafter() = default;
    virtual DraftNeeds needs() const { return {}; }
    // A request's sampling settings, before its first proposal (a drafter may draw its tokens
    // from its own distribution at the same temperature).
    virtual void begin(const sampling::SamplerParams&) {}
    // The sequence holds `tokens` at positions pos .. pos+n-1 from now on (whatever the
    // drafter knew at or after pos is gone: a rewind, a rejected draft, a new prompt), with
    // their hidden states [n][hidden_size] and captures [capture.size()][n][hidden_size] when
    // needs() asks for them (else null). Called once per prompt piece and per generation step.
    virtual void commit(int64_t /*pos*/, std::span<const int32_t> /*tokens*/, const float* /*hidden*/,
                        const float* /*captured*/) {}
    // At most `max` tokens expected after `history` (the tokens the sequence holds) and `next`
    // (the token about to be evaluated after them).
    virtual Draft propose(std::span<const int32_t> history, int32_t next, int max) = 0;

    // The drafter's own state, saved with the sequence's (docs/STATE_FORMAT.md, "Drafter
    // section"): state_kind() names its format ("": nothing to save), save_state() gives what it
    // holds of the rows committed so far, restore() takes such bytes back for a sequence that now
    // holds `tokens` (a load) and says whether it could; with empty or unusable bytes the drafter
    // forgets what it holds and starts again from the next rows it is given.
    virtual std::string state_kind() const { return ""; }
    virtual std::vector<uint8_t> save_state() const { return {}; }
    virtual bool restore(std::span<const uint8_t> /*bytes*/, std::span<const int32_t> /*tokens*/) { return false; }
};

// Gives `d` its section of a saved state (docs/STATE_FORMAT.md) for a sequence that now holds
// `tokens` (Drafter::restore; a state without a section of its kind makes it start again) and
// returns whether it was restored. Throws ds4::Error for a state that does not parse.
bool restore_drafter(Drafter& d, std::span<const uint8_t> state, std::span<const int32_t> tokens);

struct GenerateOptions {
    sampling::SamplerParams sampling{};
    int64_t max_tokens = INT64_MAX;
    const std::atomic<bool>* cancel = nullptr;
    // Test hook: emit exactly these ids instead of sampling (then stop with ForcedEnd); the
    // model still evaluates them, so timings and the KV state are real.
    const std::vector<int32_t>* forced = nullptr;
    // EOS (and the config's stop ids) are never sampled (their logits are ignored): benchmarks
    // that must run a fixed length.
    bool ban_eos = false;
    // Speculative verification: up to max_draft tokens proposed per step by the generator's
    // drafter (set_drafter; 0 or none: one token per step).
    int max_draft = 0;
    // After a step whose drafts were all rejected, the next 1, 2, 4, ... 32 steps (doubling
    // while rejections go on, back to none after an accepted draft) go without drafts, and the
    // steps between them probe with one draft: a multi-row step costs more than a one-row
    // step, and a drafter that keeps missing would make decoding slower than plain
    // (docs/SPECULATIVE.md, "Back-off").
    bool draft_backoff = true;
    // Asked before each token is sampled: true makes it the argmax of the logits whatever
    // `sampling` says (DSML-aware sampling: a tool call's structure, chat/tool_tracker.h). It
    // sees every token reported to on_token before it is asked for the next one.
    std::function<bool()> greedy = {};
};

struct GeneratorConfig {
    int64_t n_vocab = 0;
    int32_t eos = -1;
    // Further ids that end a reply like EOS (a chat format's stop_ids(), e.g. GLM's markers that
    // open the next turn); never emitted, banned with EOS under ban_eos.
    std::vector<int32_t> stop_ids = {};
    int64_t hidden_size = 0;  // model::ModelInfo::hidden_size: needed by drafters that read it
};

// What a generator has done since set_prompt() / begin().
struct GeneratorUsage {
    int64_t prompt = 0;     // prompt tokens
    int64_t reused = 0;     // held by the sequence already (not evaluated)
    int64_t evaluated = 0;  // prompt positions evaluated so far
    int64_t emitted = 0;    // tokens reported to on_token
    int64_t drafted = 0;    // draft tokens evaluated
    int64_t accepted = 0;   // of those, equal to what was then sampled
    int64_t steps = 0;      // generation steps evaluated (one per pending token)
    int64_t backed_off = 0; // steps without drafts because of the back-off
};

class Generator {
public:
    // `seq` outlives the generator; only the generator changes it between set_prompt() and the
    // end of generation (the driver evaluates the rows it asks for).
    Generator(model::Sequence& seq, GeneratorConfig cfg);

    // Makes the sequence a prefix of `prompt` to be completed by next(): keeps the longest
    // prefix it holds (all of it but the last position, whose logits are needed, unless those
    // are ready), rewinding in O(1) within the rewind slack and clearing otherwise. Returns the
    // positions kept. Throws ds4::Error (nothing changed) for an empty prompt, one that leaves
    // no room in the context, or an id outside the vocabulary.
    int64_t set_prompt(std::vector<int32_t> prompt);

    // Rows to evaluate next for this sequence, or empty tokens when none are needed (ready()
    // or stopped). Prompt pieces hold at most max_prompt tokens and end at `limit` (an absolute
    // position, e.g. a checkpoint) when it falls inside; they want logits when they end at the
    // prompt's end or at `limit`. In generation: the pending token plus drafts, wanting the
    // logits of every row (one row: the last).
    struct Rows {
        std::span<const int32_t> tokens;
        model::Logits want = model::Logits::None;
        float* logits = nullptr;  // [rows of want][n_vocab], owned by the generator
        // What the drafter reads (DraftNeeds), buffers owned by the generator.
        model::Logits hidden_want = model::Logits::None;
        float* hidden = nullptr;
        int64_t hidden_from = 0;
        std::span<const uint32_t> capture = {};
        float* captured = nullptr;

        // The batch item that evaluates these rows of `seq`.
        model::BatchItem item(model::Sequence* seq) const {
            return {seq, tokens, want, logits, hidden_want, hidden, capture, captured, hidden_from};
        }
    };
    Rows next(int64_t max_prompt, int64_t limit = INT64_MAX);
    // The driver evaluated the rows of the last next() (the sequence holds them now).
    void evaluated();

    // A new request on the held prompt: fresh sampler, counts and stop rules.
    void begin(const GenerateOptions& opt);
    // The drafter that mirrors this sequence (nullptr: none): it is told every row the
    // sequence commits from now on (Drafter::commit), and proposes drafts when a request
    // asks for them (GenerateOptions::max_draft). Not between next() and evaluated().
    void set_drafter(Drafter* d);
    Drafter* drafter() const { return drafter_; }
    // The caller's choice of the next token instead of a sample (counted as emitted, not
    // reported): the bench's distinct first tokens, a forced reply prefix.
    void choose(int32_t id);
    // Samples from the ready logits and reports each token to on_token (false: stop after
    // it), verifying drafts as described above. Returns the stop reason, or nullopt when the
    // pending token (and its drafts) must be evaluated first. Requires ready().
    std::optional<StopReason> advance(const std::function<bool(int32_t)>& on_token);
    // Inside on_token: the logits the reported token was sampled from (the row of its position,
    // n_vocab values; a banned id holds -inf). Empty outside the callback.
    std::span<const float> token_logits() const {
        return token_row_ < 0 ? std::span<const float>() : row_logits(token_row_);
    }

    // The whole prompt is held and the logits of its last position are ready to sample.
    bool ready() const;
    // A token is waiting to be evaluated (generation is under way).
    bool decoding() const { return pending_ >= 0; }
    // The rows of the last next() were generation rows (not prompt).
    bool last_was_decode() const { return last_decode_; }
    // The next-token logits after the sequence's last position, when they are at hand ([],
    // e.g. after a rewind); set_logits() gives them (a state loaded from disk).
    std::span<const float> ready_logits() const;
    void set_logits(std::vector<float> logits);

    // Forgets the step in flight, the pending token and the logits: the driver cleared the
    // sequence or gave up on an evaluation that failed.
    void reset();

    // The sequence's state (Model::save_state with the ready logits) with the drafter's section
    // when it keeps one (docs/STATE_FORMAT.md); and back: load_state() restores the sequence, the
    // ready logits and the drafter's state (a state without a section of its kind makes it start
    // again from the next rows), and returns whether the drafter's state was restored. Throws
    // ds4::Error as Model::load_state does (nothing changed). Not between next() and evaluated().
    std::vector<uint8_t> save_state(const model::Model& m) const;
    bool load_state(const model::Model& m, std::span<const uint8_t> bytes);

    const std::vector<int32_t>& prompt() const { return prompt_; }
    const GeneratorUsage& usage() const { return usage_; }
    model::Sequence& sequence() { return seq_; }

private:
    bool cancelled() const;
    std::optional<StopReason> verify(const std::function<bool(int32_t)>& on_token);
    int32_t pick(std::span<const float> logits, std::optional<StopReason>& stop);
    void settle(int64_t keep_rows);
    Draft drafts(int32_t next);
    void back_off(int64_t accepted_this_step);
    void ask_draft_outputs(int64_t from, int64_t rows);
    void commit_draft_outputs(int64_t pos, std::span<const int32_t> tokens, int64_t rows, int64_t keep);
    int32_t verify_sample(int64_t j, std::optional<StopReason>& stop);
    void ban(std::span<const float> row) const;
    bool ends_reply(int32_t id) const {
        return id == cfg_.eos || std::find(cfg_.stop_ids.begin(), cfg_.stop_ids.end(), id) != cfg_.stop_ids.end();
    }
    std::span<const float> row_logits(int64_t j) const {
        return std::span<const float>(logits_).subspan(size_t(j * cfg_.n_vocab), size_t(cfg_.n_vocab));
    }

    model::Sequence& seq_;
    GeneratorConfig cfg_;
    std::vector<int32_t> prompt_;
    GenerateOptions opt_{};
    std::optional<sampling::Sampler> sampler_;
    size_t forced_at_ = 0;
    GeneratorUsage usage_;

    // Rows handed out by next() and not yet evaluated() (tokens point into rows_ or prompt_).
    std::vector<int32_t> rows_;  // generation: pending, then drafts
    std::vector<float> draft_probs_;  // Draft::probs of the drafts in rows_ (empty: point masses)
    Drafter* drafter_ = nullptr;
    DraftNeeds needs_;                // of drafter_
    std::vector<float> hidden_, captured_;  // the drafter's outputs of the rows in flight
    Rows out_{};
    int64_t token_row_ = -1;  // the row of the token being reported to on_token, else -1
    bool in_flight_ = false;
    bool unverified_ = false;    // a generation step was evaluated and advance() not yet run
    bool last_decode_ = false;
    int32_t pending_ = -1;

    // [logits_rows_][n_vocab] from the last evaluation with logits: row r is the next-token
    // distribution when the sequence holds logits_pos_ + r positions (-1: none).
    std::vector<float> logits_;
    int64_t logits_rows_ = 0;
    int64_t logits_pos_ = -1;
    int64_t base_ = 0;  // pos() before the last generation step's rows
    int64_t backoff_len_ = 0, backoff_wait_ = 0;  // GenerateOptions::draft_backoff
};

}  // namespace ds4::engine
