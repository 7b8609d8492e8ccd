#include "server/scheduler.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace ds4::server {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

}  // namespace

Scheduler::Scheduler(model::Model& model, const tokenizer::Tokenizer& tok, SchedulerOptions opt, Metrics& metrics)
    : model_(model), tok_(tok), opt_(opt), metrics_(metrics) {
    if (opt_.parallel < 1) ds4::fail("--parallel {} must be at least 1", opt_.parallel);
    if (opt_.quantum < 1) ds4::fail("--mixed-prefill-quantum {} must be at least 1", opt_.quantum);
    if (opt_.session.prefill_chunk < 1) ds4::fail("prefill chunk {} must be positive", opt_.session.prefill_chunk);
    slots_.resize(size_t(opt_.parallel));
    for (auto& s : slots_) s.seq = model_.new_sequence(opt_.session.sequence());
    running_.resize(slots_.size());
    metrics_.slots = int64_t(slots_.size());
    thread_ = std::thread([this] { worker(); });
}

Scheduler::~Scheduler() { shutdown(); }

Scheduler::Submit Scheduler::submit(std::unique_ptr<Job>& job) {
    {
        std::lock_guard lock(mutex_);
        if (stopping_) return Submit::Stopping;
        // Waiting beyond the free slots counts against the bound.
        if (int64_t(queue_.size()) + busy_ >= int64_t(slots_.size()) + opt_.max_queue) {
            ++metrics_.queue_rejected;
            return Submit::QueueFull;
        }
        job->enqueued = clock_type::now();
        queue_.push_back(std::move(job));
        ++metrics_.queue_depth;
    }
    cv_.notify_one();
    return Submit::Queued;
}

void Scheduler::shutdown() {
    {
        std::lock_guard lock(mutex_);
        if (!stopping_) {
            stopping_ = true;
            for (auto& j : queue_) {
                j->channel->shutdown = true;
                j->channel->cancel = true;
            }
            for (auto& ch : running_)
                if (ch) {
                    ch->shutdown = true;
                    ch->cancel = true;
                }
        }
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
}

size_t Scheduler::choose_slot(const std::vector<int32_t>& prompt) const {
    constexpr size_t none = SIZE_MAX;
    size_t cont = none, empty = none, any = none;
    int64_t cont_len = -1, any_len = -1;
    for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        if (s.job) continue;
        const int64_t pos = s.seq->pos();
        if (pos == 0) {
            if (empty == none) empty = i;
            continue;
        }
        const int64_t c = s.seq->common_prefix(prompt);
        // Continuing: the request holds the slot's last prompt whole (what follows it, the
        // reply, may be re-rendered differently, e.g. without its reasoning).
        if (c > 0 && c >= s.last_prompt && c > cont_len) {
            cont = i;
            cont_len = c;
        }
        if (c > any_len || (c == any_len && s.last_used < slots_[any].last_used)) {
            any = i;
            any_len = c;
        }
    }
    if (cont != none) return cont;
    if (empty != none) return empty;
    return any;
}

void Scheduler::admit_locked() {
    while (!queue_.empty()) {
        if (busy_ == int64_t(slots_.size())) return;
        std::unique_ptr<Job> job = std::move(queue_.front());
        queue_.pop_front();
        --metrics_.queue_depth;
        const size_t i = choose_slot(job->prompt);
        Slot& s = slots_[i];
        running_[i] = job->channel;
        ++busy_;
        s.job = std::move(job);
        ++metrics_.active;
        s.gen = std::make_unique<Generation>(*s.job, tok_, metrics_);
        start(s);
    }
}

// Keeps the longest prefix the slot shares with the prompt (the last prompt position is
// evaluated again for its logits unless the slot holds exactly the prompt with logits).
void Scheduler::start(Slot& s) {
    const std::vector<int32_t>& prompt = s.job->prompt;
    const int64_t n = int64_t(prompt.size());
    s.admitted = clock_type::now();
    s.sampler.emplace(s.job->request.sampling);
    s.forced_at = 0;
    s.pending = -1;
    int64_t keep = s.seq->common_prefix(prompt);
    if (!(keep == n && s.seq->pos() == n && s.logits_ready)) {
        keep = std::min(keep, n - 1);
        s.logits_ready = false;
        if (keep < s.seq->pos()) {
            if (s.seq->can_rewind(keep)) {
                s.seq->rewind(keep);
            } else {
                // Too far back for the rings: the prefix is evaluated again with the prompt,
                // in steps like any prefill, rather than stalling every other slot.
                s.seq->clear();
                keep = 0;
            }
        }
    }
    s.usage = Usage{.prompt = n, .cached = keep, .written = n - keep};
    s.last_prompt = n;
}

void Scheduler::release(Slot& s) {
    s.job.reset();
    s.gen.reset();
    s.sampler.reset();
    s.pending = -1;
    s.last_used = steps_;
    for (size_t i = 0; i < slots_.size(); ++i)
        if (&slots_[i] == &s) {
            std::lock_guard lock(mutex_);
            running_[i].reset();
            --busy_;
        }
    --metrics_.active;
}

void Scheduler::end(Slot& s, engine::StopReason reason) {
    s.gen->finish(reason);
    release(s);
}

void Scheduler::fail(Slot& s, const std::string& message, int status) {
    s.gen->fail(message, status);
    release(s);
}

// The generation loop of one slot whose logits are ready (engine::Engine::generate's order:
// limit, cancel, sample, EOS, report, limit, room).
void Scheduler::after_logits(Slot& s) {
    Job& job = *s.job;
    const int64_t emitted = s.gen->emitted();
    if (emitted >= job.max_tokens) return end(s, engine::StopReason::Length);
    if (job.channel->cancel) return end(s, engine::StopReason::Cancelled);
    int32_t id;
    if (job.forced) {
        if (s.forced_at == job.forced->size()) return end(s, engine::StopReason::ForcedEnd);
        id = (*job.forced)[s.forced_at++];
    } else {
        id = s.sampler->sample(std::span<const float>(s.logits.data(), s.logits.size()));
    }
    if (id == tok_.special().eos) return end(s, engine::StopReason::Eos);
    if (!s.gen->token(id)) return end(s, engine::StopReason::Caller);
    if (s.gen->emitted() >= job.max_tokens) return end(s, engine::StopReason::Length);
    // The emitted token needs a position, and the one after it room to be emitted.
    if (s.seq->pos() + 1 >= s.seq->options().ctx) return end(s, engine::StopReason::ContextFull);
    s.pending = id;
}

bool Scheduler::step() {
    const size_t V = model_.info().n_vocab;
    // Cancelled slots end first (a client that left, a timeout, shutdown).
    for (auto& s : slots_) {
        if (!s.job || !s.job->channel->cancel) continue;
        if (s.gen->started()) end(s, engine::StopReason::Cancelled);
        else fail(s, s.job->channel->cancel_reason() + (s.seq->pos() > 0 ? " during prefill" : ""),
                  s.job->channel->cancel_status());
    }
    // Slots whose prompt is already held with its logits start generating at once.
    for (auto& s : slots_)
        if (s.job && !s.gen->started() && s.logits_ready && s.seq->pos() == int64_t(s.job->prompt.size())) {
            s.gen->begin(s.usage, seconds_since(s.admitted));
            after_logits(s);
        }

    bool decoding = false;
    for (const auto& s : slots_) decoding = decoding || (s.job && s.pending >= 0);
    std::vector<model::BatchItem> items;
    std::vector<Slot*> owners;
    for (auto& s : slots_) {
        if (!s.job) continue;
        model::BatchItem it;
        it.seq = s.seq.get();
        if (s.pending >= 0) {
            it.tokens = std::span<const int32_t>(&s.pending, 1);
        } else {
            const auto& prompt = s.job->prompt;
            const int64_t pos = s.seq->pos(), n = int64_t(prompt.size());
            const int64_t len = std::min(decoding ? opt_.quantum : opt_.session.prefill_chunk, n - pos);
            it.tokens = std::span<const int32_t>(prompt.data() + pos, size_t(len));
            if (pos + len < n) {
                it.want = model::Logits::None;
                items.push_back(it);
                owners.push_back(&s);
                continue;
            }
        }
        s.logits.resize(V);
        it.want = model::Logits::Last;
        it.logits = s.logits.data();
        items.push_back(it);
        owners.push_back(&s);
    }
    if (items.empty()) return false;

    for (Slot* s : owners)
        if (s->pending < 0) s->gen->prefill_progress();
    try {
        model_.eval(model::Batch(items.data(), items.size()));
    } catch (const std::exception& e) {
        // Model::eval checks before changing anything, and every item was checked here; an
        // error now (memory) fails this step's requests, whose slots start over.
        for (Slot* s : owners) {
            s->seq->clear();
            s->logits_ready = false;
            fail(*s, std::string("evaluation failed: ") + e.what(), 500);
        }
        return true;
    }
    ++steps_;
    ++metrics_.batch_steps;
    metrics_.batch_rows += uint64_t(model::batch_rows(model::Batch(items.data(), items.size())));
    metrics_.batch_sequences += items.size();
    metrics_.last_batch_sequences = int64_t(items.size());

    for (size_t i = 0; i < items.size(); ++i) {
        Slot& s = *owners[i];
        s.pending = -1;
        if (items[i].want == model::Logits::None) continue;
        s.logits_ready = true;
        if (!s.gen->started()) s.gen->begin(s.usage, seconds_since(s.admitted));
        after_logits(s);
    }
    return true;
}

void Scheduler::worker() {
    for (;;) {
        {
            std::unique_lock lock(mutex_);
            cv_.wait(lock, [&] { return stopping_ || !queue_.empty() || busy_ > 0; });
            if (stopping_ && queue_.empty() && busy_ == 0) return;
            admit_locked();
        }
        try {
            step();
        } catch (const std::exception& e) {
            // A last resort (a writer or sampler error): end every request on the engine.
            std::fprintf(stderr, "ds4-server: scheduler step failed: %s\n", e.what());
            for (auto& s : slots_)
                if (s.job) {
                    s.job->channel->close(500);
                    s.seq->clear();
                    s.logits_ready = false;
                    release(s);
                }
        }
    }
}

}  // namespace ds4::server
