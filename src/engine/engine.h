// One live timeline over a loaded model, as the CLI's chat loop drives it (spec/PRODUCT.md §3.1
// "Session API"), on a Generator (engine/generator.h) that it evaluates alone; the server's
// scheduler drives many generators in one batch instead. sync() makes the session hold a given
// token sequence,
// reusing the longest common prefix it already holds and evaluating only the rest; generate()
// samples, reports and evaluates tokens until a stop. Not thread-safe: one caller at a time.
//
//   Engine e(model, tok, {.ctx = 8192});
//   e.sync(prompt_ids);                              // prefill (only the new suffix)
//   e.generate(opts, [&](int32_t id) { ...; return true; });
//   transcript = prompt_ids + generated ids; next turn: e.sync(transcript + new turn)
//
// After generate() the session holds the prompt and a prefix of the emitted tokens (usually all
// but the last); the next sync() with the whole transcript evaluates whatever it lacks, plus
// the turn's closing EOS when the caller puts it in the sequence.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "engine/generator.h"
#include "model/session.h"

namespace ds4::tokenizer {
class Tokenizer;
}

namespace ds4::engine {

// Called after each prefill chunk with (evaluated so far, total to evaluate).
using Progress = std::function<void(int64_t done, int64_t total)>;

struct SyncResult {
    int64_t reused = 0;     // positions kept from the live session
    int64_t evaluated = 0;  // positions evaluated now
    double seconds = 0;     // time spent evaluating
    bool cancelled = false; // stopped between chunks; the session holds a prefix of the prompt
};

struct GenerateResult {
    StopReason reason = StopReason::Eos;
    int64_t emitted = 0;
    double seconds = 0;  // from the first sample to the stop
};

class Engine {
public:
    // `stop_ids`: ids besides the tokenizer's EOS that end a reply (the chat format's stop_ids()).
    Engine(model::Model& model, const tokenizer::Tokenizer& tok, model::SessionOptions opt,
           std::vector<int32_t> stop_ids = {});

    // Makes the session hold exactly `tokens` (non-empty, shorter than the context) with the
    // logits of its last position ready for generate(). Chunks of options().prefill_chunk;
    // `progress` after each, `cancel` checked between them. Throws ds4::Error when the
    // sequence does not fit the context or holds an invalid id (the session is then unchanged
    // or holds a prefix of `tokens`).
    SyncResult sync(const std::vector<int32_t>& tokens, const Progress& progress = {},
                    const std::atomic<bool>* cancel = nullptr);

    // Samples from the ready logits, reports each id to on_token (return false to stop after
    // it), evaluates it and samples again, until a StopReason. Requires a sync() first.
    GenerateResult generate(const GenerateOptions& opt, const std::function<bool(int32_t)>& on_token);
    // Inside generate()'s on_token: the logits the reported token was sampled from
    // (Generator::token_logits; ds4-eval's soft thinking budget reads the rank of </think>).
    std::span<const float> token_logits() const { return gen_.token_logits(); }
    // What the last sync() and generate() did (drafted and accepted tokens included).
    const GeneratorUsage& usage() const { return gen_.usage(); }
    // The speculative drafter mirroring the session (Generator::set_drafter); requests use it
    // when GenerateOptions::max_draft > 0.
    void set_drafter(Drafter* d) { gen_.set_drafter(d); }

    // The positions the session holds, and its context size.
    int64_t pos() const { return session_.pos(); }
    int64_t ctx() const { return session_.options().ctx; }
    const std::vector<int32_t>& tokens() const { return session_.tokens(); }
    model::Session& session() { return session_; }
    const model::Model& model() const { return model_; }

    // The live session's state with the logits of its last position and the drafter's section
    // (docs/STATE_FORMAT.md), and back: after load_state() the session holds the saved tokens
    // and generate() can run at once; it returns whether the drafter's state was restored
    // (Generator::load_state). Throws ds4::Error for a state of another model, a corrupted one,
    // or one that does not fit the context; the session is then unchanged.
    std::vector<uint8_t> save_state() const;
    bool load_state(std::span<const uint8_t> bytes);
    const tokenizer::Tokenizer& tokenizer() const { return tok_; }

private:
    void eval(const Generator::Rows& rows);

    model::Model& model_;
    const tokenizer::Tokenizer& tok_;
    model::Session session_;
    Generator gen_;
};

}  // namespace ds4::engine
