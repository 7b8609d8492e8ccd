// Many clients on one model (spec/PRODUCT.md §4.1, §4.11): --parallel N slots, each a live
// sequence (KV state + tokens) that keeps its conversation between requests. A request waits in
// a bounded FIFO queue until a slot is free; beyond --max-queue it is refused at once (503).
//
// One worker thread drives every busy slot with one batched evaluation per step
// (model::Model::eval over a Batch). Each slot's request runs on an engine::Generator (prefix
// reuse, sampling, stop rules, verification: the one generation loop of every front end); the
// scheduler only chooses slots, cuts prompts at checkpoints and batches the generators' rows:
// each generating slot contributes the token it just sampled,
// each slot still reading its prompt a chunk of it: while others generate, as many tokens as the
// cost model allows (server/scheduler_cost.h: the step may take up to --max-decode-stall times
// the generation rows alone, shared by the slots reading a prompt; a fixed
// --mixed-prefill-quantum when given), a whole --prefill-chunk when nobody does. Every slot
// keeps its own sampler, stop rules and cancellation; a client that leaves frees its slot at the
// next step. A sequence's results do not depend on the other rows of a batch (the execution
// interface's contract), so N requests at once produce exactly what they produce one by one.
//
// Slot choice for a new request: the free slot whose conversation the request continues (it
// holds that slot's last prompt whole) with the longest shared prefix; else an empty slot;
// else the free slot sharing the longest prefix, least recently used first (its conversation is
// dropped; with a disk cache it is saved first). A live slot is never taken.
//
// Disk KV cache (--kv-disk-dir; spec/PRODUCT.md §5, docs/SERVER.md "Disk KV cache"): when the
// live slot holds less of a prompt than a checkpoint on disk, the checkpoint is loaded into the
// slot (its tokens are authoritative; only the prompt text after it is tokenized and evaluated).
// Checkpoints are written at the policy's points (server/kv_policy.h): cold (a prompt's chat
// anchor), continued (absolute frontiers), evict (before a slot's conversation is replaced) and
// shutdown. Writes happen on the worker between steps (kvcache::DiskCache makes them atomic).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "kvcache/disk_cache.h"
#include "model/model.h"
#include "model/session.h"
#include "engine/generator.h"
#include "server/generation.h"
#include "server/job.h"
#include "server/kv_policy.h"
#include "server/metrics.h"
#include "server/scheduler_cost.h"
#include "server/tool_memory.h"

namespace ds4::tokenizer {
class Tokenizer;
}

namespace ds4::server {

struct KvDiskOptions {
    std::string dir;               // empty: no disk cache
    uint64_t space_mb = 4096;      // --kv-disk-space-mb: the directory's budget
    KvPolicy policy;
};

struct SchedulerOptions {
    int parallel = 1;             // slots (live sequences)
    // Prompt tokens a slot evaluates per step while others generate: 0 (the default) lets the
    // cost model choose (StepCost), N >= 1 fixes the piece.
    int64_t quantum = 0;
    double max_decode_stall = 4.0;  // the cost model's bound (StepCost::Options::stall)
    int max_queue = 64;           // requests waiting beyond the free slots; more are refused
    model::SessionOptions session;  // ctx, prefill chunk, QAT, rewind slack of every slot
    KvDiskOptions kv;
    // Speculative decoding (docs/SPECULATIVE.md): each slot gets a drafter mirroring its
    // sequence, and every request verifies up to max_draft drafts per step inside the batched
    // step (unset / 0: one token per step).
    std::function<std::unique_ptr<engine::Drafter>(const model::SequenceOptions&)> new_drafter;
    int max_draft = 0;
};

class Scheduler {
public:
    // Allocates the slots' sequences (each sized for the whole context).
    // `format` (the model's chat format, with its tokenizer) outlives the scheduler.
    Scheduler(model::Model& model, const chat::ChatFormat& format, SchedulerOptions opt, Metrics& metrics);
    ~Scheduler();  // shutdown()

    enum class Submit { Queued, QueueFull, Stopping };
    // Queues `job` (taken only when Queued).
    Submit submit(std::unique_ptr<Job>& job);
    // Stops taking jobs, cancels the queued ones and the running ones (they finish with
    // "shutdown requested"), and joins the worker.
    void shutdown();

    int slots() const { return int(slots_.size()); }
    const SchedulerOptions& options() const { return opt_; }
    // The disk cache (null without --kv-disk-dir); thread-safe.
    kvcache::DiskCache* disk() { return disk_.get(); }
    // Tool-call memory whose entries are saved in and restored from disk checkpoints (set
    // before the first request; may stay null).
    void set_tool_memory(ToolMemory* memory) { tool_memory_ = memory; }
    // The disk cache's counters in Prometheus text ("" without one).
    std::string prometheus() const;

private:
    struct Slot {
        std::unique_ptr<model::Sequence> seq;
        std::unique_ptr<engine::Drafter> drafter;  // mirrors seq (speculative decoding), or null
        std::unique_ptr<engine::Generator> gen;  // the generation state machine over seq
        uint64_t last_used = 0;         // step of the last request's end (LRU)
        int64_t last_prompt = 0;        // prompt length of the last request
        bool fresh = false;             // admitted, start() not yet run
        uint64_t version = 0;           // changes whenever the sequence does...
        uint64_t saved_version = UINT64_MAX;  // ...and this is its value at the last checkpoint
        int64_t store_at = 0;           // a cold checkpoint at this position (0: none)
        std::vector<std::string> tool_ids;  // tool-call ids of the conversation (history + replies)
        // The request on the slot (null: free) and its output.
        std::unique_ptr<Job> job;
        std::unique_ptr<Generation> out;
        Usage usage;
        std::chrono::steady_clock::time_point admitted;
    };

    void worker();
    // Moves queued jobs into free slots (mutex held).
    void admit_locked();
    size_t choose_slot(const std::vector<int32_t>& prompt) const;
    void start(Slot& s);                        // positions the slot's sequence for its prompt
    int64_t load_from_disk(Slot& s, int64_t keep);  // a longer prefix from disk; the new keep
    void save(Slot& s, kvcache::SaveReason reason);  // a checkpoint of the slot's sequence
    void after_logits(Slot& s);                 // samples (or ends) a slot whose logits are ready
    void restart(Slot& s);                      // the slot's sequence starts over (after an error)
    // The slot's rows for this step (tokens empty: none), with at most `piece` prompt tokens.
    engine::Generator::Rows rows_for(Slot& s, int64_t piece);
    // The slots' rows of one step: generation rows first, then prompt pieces sized by the cost
    // model (or the fixed quantum).
    void plan_step(std::vector<model::BatchItem>& items, std::vector<Slot*>& owners);
    void after_eval(Slot& s, bool decoded, bool with_logits, int64_t rows);
    void end(Slot& s, engine::StopReason reason);
    void fail(Slot& s, const std::string& message, int status);
    void release(Slot& s);
    bool step();                                // one batched evaluation; false when idle

    model::Model& model_;
    const chat::ChatFormat& format_;
    const tokenizer::Tokenizer& tok_;
    SchedulerOptions opt_;
    Metrics& metrics_;
    std::vector<Slot> slots_;
    uint64_t steps_ = 0;
    StepCost cost_;
    std::unique_ptr<kvcache::DiskCache> disk_;
    ToolMemory* tool_memory_ = nullptr;
    std::atomic<uint64_t> kv_refused_ = 0;      // hits refused: marker layout or state mismatch
    std::atomic<uint64_t> kv_saves_ = 0, kv_save_us_ = 0;

    std::mutex mutex_;
    std::condition_variable cv_;
    std::deque<std::unique_ptr<Job>> queue_;
    std::vector<std::shared_ptr<Channel>> running_;  // per slot, for shutdown()
    int64_t busy_ = 0;                                // slots with a job
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace ds4::server
