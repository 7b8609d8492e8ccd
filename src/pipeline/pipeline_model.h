// The coordinator's side of a pipeline as a model::Model (docs/DISTRIBUTED.md), so every front
// end runs unchanged over several processes: eval() embeds and runs the coordinator's own layers
// here, sends the hidden state in a WORK to the first worker of the route, and gets back the
// logits (or, when no worker holds the output head, the last hidden state, and runs the head
// here), an ACK when no logits are wanted. The draft seam's outputs (model.h BatchItem::hidden,
// ::capture) come back with the answer, for a drafter on the coordinator: its own layers'
// captures from here, the others' and the final hidden state in the RESULT's draft rows
// (docs/DISTRIBUTED.md, "Draft rows"). A call's tokens go out in WORKs of
// --dist-prefill-chunk tokens; ACK-only ones stay in flight (up to --dist-prefill-window)
// while the next chunk runs here, so the stages compute at the same time (prefill pipelining).
//
// Each PipelineSequence has a random session id and the token hash of what it holds; every
// WORK carries the hash before and after its span, so a worker whose state for the session
// differs (it restarted, the sequence was rewound or cleared, a clone) answers with a status
// instead of computing on a wrong prefix, and the coordinator replays the sequence's tokens
// from position 0 (RESET_SESSION) and tries once more. A worker rewinds its own state when the
// span starts before its end at a prefix it holds (what Sequence::rewind allows locally).
// A transport failure fails the call with "route incomplete: ..." and marks the sequence to be
// replayed; a worker that registers again is caught up by that replay.
//
// save_state / load_state give and take whole-model states (docs/STATE_FORMAT.md): the
// coordinator's range state merged with each worker's, fetched and pushed with the SNAPSHOT
// frames on fresh data connections.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "dist/auth.h"
#include "dist/connection.h"
#include "model/model.h"
#include "pipeline/coordinator.h"
#include "pipeline/options.h"

namespace ds4::pipeline {

class PipelineSequence;

class PipelineModel final : public model::Model {
public:
    // `local` holds layers 0:K; the coordinator listens and waits for the route (see
    // Coordinator). `path` and `open` reopen the file for the output head when no worker holds
    // it.
    PipelineModel(std::unique_ptr<model::Model> local, const std::string& path, const model::OpenOptions& open,
                  const DistOptions& dist);
    ~PipelineModel() override;

    const model::ModelInfo& info() const override { return info_; }
    const gguf::File& file() const override { return local_->file(); }
    std::unique_ptr<model::Sequence> new_sequence(const model::SequenceOptions& opt) const override;
    int64_t sequence_bytes(const model::SequenceOptions& opt) const override { return local_->sequence_bytes(opt); }

    // The stages are not offered across processes: eval() runs them.
    void embed(model::Batch b, float* hidden) override;
    void eval_layers(model::Batch b, float* hidden) override;
    void head(model::Batch b, const float* hidden) override;
    void eval(model::Batch b) override;

    std::vector<uint8_t> save_state(const model::Sequence& seq, std::span<const float> logits = {}) const override;
    void load_state(std::span<const uint8_t> bytes, model::Sequence& seq,
                    std::vector<float>* logits = nullptr) const override;
    void set_expert_source(std::shared_ptr<model::ExpertSource> source) override {
        local_->set_expert_source(std::move(source));
    }
    // The coordinator's own slice: --ssd-streaming streams the experts of its layers.
    std::shared_ptr<model::ExpertSource> expert_source() const override { return local_->expert_source(); }
    model::ExpertFileLayout expert_layout() const override { return local_->expert_layout(); }

    Coordinator& coordinator() { return *coord_; }
    model::Model& local() { return *local_; }

private:
    friend class PipelineSequence;
    struct StateMismatch {};

    struct Chunk;

    void eval_item(PipelineSequence& ps, const model::BatchItem& it);
    // Several sequences' rows as one WORK per hop (docs/DISTRIBUTED.md, "Batched calls"), in
    // groups of at most dist::kMaxBatchItems; the items that cannot go in one (a drafter's
    // rows, an item longer than one WORK, a sequence to replay or one the workers never held)
    // run alone first. False (nothing done) for a single item or a route with a hop that does
    // not read batched WORK.
    bool eval_batched(model::Batch b);
    // One batched WORK; throws StateMismatch (the items' sequences are then marked for replay)
    // or ds4::Error.
    void run_batch(const Route& route, model::Batch b);
    void put_batch_logits(const Route& route, model::Batch b, const dist::Result& r);
    void replay(PipelineSequence& ps);
    // Runs it.tokens through the route from ps's position, with the logits and the draft
    // outputs `it` asks for; throws StateMismatch when a worker's state for the session
    // differs, ds4::Error otherwise.
    void run_span(PipelineSequence& ps, const model::BatchItem& it, bool reset);
    void run_span_unguarded(PipelineSequence& ps, const model::BatchItem& it, bool reset);
    // A route with an upstream worker (docs/DISTRIBUTED.md, "Mixed clusters"): throws when `it`
    // asks what that dialect cannot carry, or a hop of ours is too old to speak it.
    void check_dialect(const Route& route, const model::BatchItem& it) const;
    // A WORK's flags in upstream's dialect (0x1-0x8 only, OUTPUT_LOGITS by the first hop's entry).
    static uint32_t upstream_flags(const Route& route, uint32_t ours);
    // What chunk [b, b+len) of `it` asks of the route.
    Chunk plan_chunk(const Route& route, const model::BatchItem& it, int64_t b, int64_t len) const;
    // Reads a chunk's answer into it's buffers and advances ps.
    void collect(const Route& route, PipelineSequence& ps, const model::BatchItem& it, const Chunk& c);
    void send_work(const Route& route, const dist::Work& w);
    dist::Result recv_result(const Route& route, uint64_t request_id);

    std::unique_ptr<model::Model> local_;
    std::unique_ptr<model::Model> head_model_;      // only when no worker holds the output head
    std::unique_ptr<model::Sequence> head_seq_;     // head() needs a sequence of head_model_
    std::unique_ptr<Coordinator> coord_;
    model::ModelInfo info_;
    DistOptions dist_;
    dist::DistKey key_;
    mutable std::mutex mu_;                         // calls, save_state and load_state one at a time
    std::unique_ptr<dist::Connection> data_;        // to the route's first hop
    uint64_t data_generation_ = 0;
    mutable uint64_t next_request_ = 1;
};

// Opens the model for ds4's flags: the plain model without --role, the PipelineModel (after
// the route is complete) with --role coordinator. Throws for --role worker (run_worker).
std::unique_ptr<model::Model> open_model(const std::string& path, const model::OpenOptions& open,
                                         const DistOptions& dist);

}  // namespace ds4::pipeline
