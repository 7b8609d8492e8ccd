#include "server/scheduler.h"

#include <algorithm>

#include <fmt/format.h>

#include "chat/prompt_tokens.h"
#include "common/error.h"
#include "common/log.h"
#include "kvcache/model_dir.h"
#include "model/identity.h"
#include "model/state_file.h"
#include "tokenizer/tokenizer.h"

namespace ds4::server {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point t) {
    return std::chrono::duration<double>(clock_type::now() - t).count();
}

}  // namespace

Scheduler::Scheduler(model::Model& model, const chat::ChatFormat& format, SchedulerOptions opt, Metrics& metrics)
    : model_(model), format_(format), tok_(format.tokenizer()), opt_(opt), metrics_(metrics),
      cost_({.stall = opt.max_decode_stall, .max_piece = opt.session.prefill_chunk}) {
    if (opt_.parallel < 1) ds4::fail("--parallel {} must be at least 1", opt_.parallel);
    if (opt_.quantum < 0) ds4::fail("--mixed-prefill-quantum {} must be at least 1", opt_.quantum);
    if (!(opt_.max_decode_stall >= 1)) ds4::fail("--max-decode-stall {} must be at least 1", opt_.max_decode_stall);
    if (opt_.session.prefill_chunk < 1) ds4::fail("prefill chunk {} must be positive", opt_.session.prefill_chunk);
    slots_.resize(size_t(opt_.parallel));
    for (auto& s : slots_) {
        s.seq = model_.new_sequence(opt_.session.sequence());
        s.gen = std::make_unique<engine::Generator>(
            *s.seq, engine::GeneratorConfig{.n_vocab = model_.info().n_vocab,
                                            .eos = tok_.special().eos,
                                            .stop_ids = format_.stop_ids(),
                                            .hidden_size = model_.info().hidden_size});
        if (opt_.new_drafter) {
            s.drafter = opt_.new_drafter(opt_.session.sequence());
            s.gen->set_drafter(s.drafter.get());
        }
    }
    running_.resize(slots_.size());
    metrics_.slots = int64_t(slots_.size());
    if (!opt_.kv.dir.empty()) {
        const KvPolicy& p = opt_.kv.policy;
        if (p.cold_max_tokens != 0 && p.cold_max_tokens < p.min_tokens)
            ds4::fail("--kv-cache-cold-max-tokens {} must be 0 or at least --kv-cache-min-tokens {}",
                      p.cold_max_tokens, p.min_tokens);
        // Each model in its own subfolder of the root (kvcache/model_dir.h).
        const kvcache::Expect id{model::identity(model_), model::kStateVersion};
        const std::string dir = kvcache::model_dir(opt_.kv.dir, model::weights_identity(model_));
        const kvcache::Adopted adopted = kvcache::adopt_root_files(opt_.kv.dir, id, dir);
        if (adopted.moved > 0)
            log::info("ds4-server: kv cache: moved {} checkpoints of this model from {} into its subfolder",
                      adopted.moved, opt_.kv.dir);
        disk_ = std::make_unique<kvcache::DiskCache>(kvcache::Options{
            .dir = dir,
            .budget_bytes = opt_.kv.space_mb << 20,
            .model_id = id.model_id,
            .payload_version = id.payload_version});
        const auto st = disk_->stats();
        log::info("ds4-server: kv cache {}: {} files, {:.1f} of {} MB", dir, st.files,
                  double(st.total_bytes) / (1 << 20), opt_.kv.space_mb);
    }
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
    if (thread_.joinable()) {
        thread_.join();
        // Clean exit: every live conversation goes to disk (a restarted server resumes it).
        if (disk_)
            for (auto& sl : slots_) save(sl, kvcache::SaveReason::shutdown);
    }
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
        s.out = std::make_unique<Generation>(*s.job, format_, metrics_);
        s.fresh = true;  // start() runs outside the lock: it may read or write the disk cache
    }
}

// Keeps the longest prefix the slot shares with the prompt (the last prompt position is
// evaluated again for its logits unless the slot holds exactly the prompt with logits).
void Scheduler::start(Slot& s) {
    Job& job = *s.job;
    s.admitted = clock_type::now();
    s.store_at = 0;
    const bool continues = s.seq->pos() > 0 && s.seq->common_prefix(job.prompt) >= s.last_prompt;
    if (!continues) s.tool_ids.clear();
    for (const auto& m : job.request.messages)
        for (const auto& c : m.tool_calls)
            if (!c.id.empty()) s.tool_ids.push_back(c.id);
    const int64_t keep = s.seq->common_prefix(job.prompt);
    if (disk_ && keep + 1 < int64_t(job.prompt.size())) {
        // The conversation the slot holds goes unless the request continues it: saved first.
        if (!continues) save(s, kvcache::SaveReason::evict);
        load_from_disk(s, keep);
    }
    const int64_t held = s.seq->pos();
    const int64_t kept = s.gen->set_prompt(job.prompt);
    if (kept < held) ++s.version;
    s.gen->begin({.sampling = job.request.sampling,
                  .max_tokens = job.max_tokens,
                  .cancel = &job.channel->cancel,
                  .forced = job.forced ? &*job.forced : nullptr,
                  .max_draft = s.drafter ? opt_.max_draft : 0,
                  .greedy = [out = s.out.get()] { return out->structural(); }});
    const int64_t n = int64_t(job.prompt.size());
    s.usage = Usage{.prompt = n, .cached = kept, .written = n - kept};
    s.last_prompt = n;
    if (disk_) {
        const int64_t at = cold_store_point(job.prompt, opt_.kv.policy, format_.markers());
        if (at > kept && at < n) s.store_at = at;
    }
}

int64_t Scheduler::load_from_disk(Slot& s, int64_t keep) {
    Job& job = *s.job;
    const int64_t ctx = opt_.session.ctx;
    const auto hit = disk_->lookup(job.rendered.text, ctx, std::max<int64_t>(opt_.kv.policy.min_tokens, keep + 1));
    if (!hit) return keep;
    const auto entry = disk_->load(*hit, job.rendered.text);
    if (!entry) return keep;  // damaged (removed, warned) or a hash collision
    auto refuse = [&](const std::string& why) {
        ++kv_refused_;
        log::warn("ds4-server: kv cache: not using {}: {}", hit->file, why);
    };
    // Loaded into the slot's own sequence (no second context-sized allocation): load_state
    // leaves it unchanged on error; a refusal after loading clears it.
    std::vector<float> logits;
    try {
        model_.load_state(entry->payload, *s.seq, &logits);
    } catch (const std::exception& e) {
        // Not this model's state (weights that differ behind an equal layout) or a payload
        // that does not parse: the file can never serve this model.
        disk_->discard(*hit, kvcache::Cause::foreign, std::string("the model refused its state: ") + e.what());
        return keep;
    }
    ++s.version;
    s.gen->reset();
    const std::vector<int32_t>& cached = s.seq->tokens();
    auto drop = [&](const std::string& why) {
        refuse(why);
        s.seq->clear();
        return int64_t(0);
    };
    if (tok_.decode(cached) != entry->text) return drop("its tokens do not decode to its text");
    // Equal bytes are not enough: a marker in one and look-alike user text in the other.
    const size_t text_bytes = entry->text.size();
    if (control_tokens(tok_, cached) != control_tokens(tok_, job.prompt, text_bytes))
        return drop("its control tokens differ from the prompt's");
    std::vector<int32_t> prompt = cached;
    const auto rest = format_.tokenize(rendered_suffix(job.rendered, text_bytes));
    prompt.insert(prompt.end(), rest.begin(), rest.end());
    if (int64_t(prompt.size()) >= ctx) return drop("the prompt it leaves does not fit");
    s.gen->set_logits(std::move(logits));
    // The slot's drafter continues from the file's drafter section (or starts again).
    if (engine::Drafter* d = s.gen->drafter()) engine::restore_drafter(*d, entry->payload, cached);
    s.saved_version = s.version;  // the disk holds exactly this
    // The tool calls it knew, for exact replay of the calls this conversation made.
    if (tool_memory_)
        for (const auto& [id, block] : entry->tools) tool_memory_->put(id, block);
    const int64_t max_tokens_room = ctx - int64_t(prompt.size());
    job.max_tokens = std::min(job.max_tokens, max_tokens_room);
    job.prompt = std::move(prompt);
    return int64_t(cached.size());
}

void Scheduler::save(Slot& s, kvcache::SaveReason reason) {
    if (!disk_ || !disk_->saving_enabled()) return;
    const std::vector<int32_t>& toks = s.seq->tokens();
    if (int64_t(toks.size()) < opt_.kv.policy.min_tokens) return;
    if (s.saved_version == s.version) return;  // unchanged since its last checkpoint (or load)
    const auto t0 = clock_type::now();
    try {
        const std::string text = tok_.decode(toks);
        const auto payload = s.gen->save_state(model_);  // with the drafter's section
        kvcache::ToolMap tools;
        if (tool_memory_)
            for (auto& [id, block] : tool_memory_->entries_for(s.tool_ids))
                if (text.find(block) != std::string::npos) tools.emplace_back(id, block);
        const kvcache::StoreMeta meta{.reason = reason, .tokens = int64_t(toks.size()), .ctx = opt_.session.ctx};
        if (disk_->store(text, payload, meta, tools)) {
            s.saved_version = s.version;
            ++kv_saves_;
            kv_save_us_ += uint64_t(seconds_since(t0) * 1e6);
        }
    } catch (const std::exception& e) {
        log::warn("ds4-server: kv cache: save failed: {}", e.what());
    }
}

void Scheduler::release(Slot& s) {
    s.job.reset();
    s.out.reset();
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
    metrics_.draft_tokens += uint64_t(s.gen->usage().drafted);
    metrics_.draft_accepted += uint64_t(s.gen->usage().accepted);
    s.out->finish(reason);
    for (auto& id : s.job->writer->tool_ids()) s.tool_ids.push_back(id);
    release(s);
}

void Scheduler::fail(Slot& s, const std::string& message, int status) {
    s.out->fail(message, status);
    release(s);
}

// A slot whose logits are ready: its generator samples (verifying drafts), reports each token
// to the request's output and either leaves a token pending or stops.
void Scheduler::after_logits(Slot& s) {
    if (const auto stop = s.gen->advance([&](int32_t id) { return s.out->token(id, s.gen->token_logits()); })) end(s, *stop);
}

void Scheduler::restart(Slot& s) {
    s.seq->clear();
    s.gen->reset();
    ++s.version;
}

engine::Generator::Rows Scheduler::rows_for(Slot& s, int64_t piece) {
    int64_t limit = INT64_MAX;
    if (!s.gen->decoding()) {
        // Checkpoints cut the prompt: the piece ends exactly where one is due.
        const int64_t pos = s.seq->pos();
        if (s.store_at > pos) limit = s.store_at;
        if (disk_)
            if (const int64_t f = next_frontier(pos, opt_.kv.policy); f > 0) limit = std::min(limit, f);
    }
    return s.gen->next(piece, limit);
}

void Scheduler::plan_step(std::vector<model::BatchItem>& items, std::vector<Slot*>& owners) {
    // Generation rows first: how many there are sizes the prompt pieces.
    int64_t decode_rows = 0, prefilling = 0;
    std::vector<std::pair<Slot*, model::BatchItem>> rows(slots_.size());
    for (size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_[i];
        if (!s.job) continue;
        if (!s.gen->decoding()) {
            ++prefilling;
            continue;
        }
        const engine::Generator::Rows r = rows_for(s, opt_.session.prefill_chunk);
        if (r.tokens.empty()) continue;
        rows[i] = {&s, r.item(s.seq.get())};
        decode_rows += int64_t(r.tokens.size());
    }
    const int64_t piece = decode_rows == 0  ? opt_.session.prefill_chunk
                          : opt_.quantum > 0 ? opt_.quantum
                                             : cost_.piece(decode_rows, prefilling);
    for (size_t i = 0; i < slots_.size(); ++i) {
        Slot& s = slots_[i];
        if (!s.job || s.gen->decoding()) continue;
        const engine::Generator::Rows r = rows_for(s, piece);
        if (!r.tokens.empty()) rows[i] = {&s, r.item(s.seq.get())};
    }
    // In slot order, as before (a sequence's results do not depend on its place in the batch).
    for (auto& [slot, item] : rows)
        if (slot) {
            items.push_back(item);
            owners.push_back(slot);
        }
}

// After the batch (`rows` evaluated for the slot): checkpoints due at this position, then the
// next token.
void Scheduler::after_eval(Slot& s, bool decoded, bool with_logits, int64_t rows) {
    if (!with_logits) return;
    const int64_t step = continued_step(opt_.kv.policy);
    // A generation step with drafts holds rows that verification may reject: its continued
    // checkpoint waits for the verified history (below).
    const bool drafted = decoded && rows > 1;
    if (disk_ && !drafted) {
        const int64_t pos = s.seq->pos();
        if (!decoded && pos == s.store_at) {
            save(s, kvcache::SaveReason::cold);
            s.store_at = 0;
        } else if (step > 0 && pos % step == 0 && !s.out->in_tool_block()) {
            save(s, kvcache::SaveReason::continued);
        }
    }
    if (!decoded && !s.gen->ready()) return;  // a checkpoint inside the prompt, not its end
    if (!s.out->started()) s.out->begin(s.usage, seconds_since(s.admitted));
    const int64_t before = s.seq->pos() - rows;
    after_logits(s);
    // The verified step kept some of its rows: due when they reached a multiple of the interval.
    if (drafted && disk_ && step > 0 && s.job && s.seq->pos() / step > before / step && !s.out->in_tool_block())
        save(s, kvcache::SaveReason::continued);
}

bool Scheduler::step() {
    // Cancelled slots end first (a client that left, a timeout, shutdown).
    for (auto& s : slots_) {
        if (!s.job || !s.job->channel->cancel) continue;
        if (s.out->started()) end(s, engine::StopReason::Cancelled);
        else fail(s, s.job->channel->cancel_reason() + (s.seq->pos() > 0 ? " during prefill" : ""),
                  s.job->channel->cancel_status());
    }
    // Slots whose prompt is already held with its logits start generating at once.
    for (auto& s : slots_)
        if (s.job && !s.out->started() && s.gen->ready()) {
            s.out->begin(s.usage, seconds_since(s.admitted));
            after_logits(s);
        }

    std::vector<model::BatchItem> items;
    std::vector<Slot*> owners;
    plan_step(items, owners);
    if (items.empty()) return false;

    for (Slot* s : owners)
        if (!s->gen->decoding()) s->out->prefill_progress();
    const int64_t rows = model::batch_rows(model::Batch(items.data(), items.size()));
    const auto t0 = clock_type::now();
    try {
        model_.eval(model::Batch(items.data(), items.size()));
        cost_.observe(rows, seconds_since(t0));
    } catch (const std::exception& e) {
        // Model::eval checks before changing anything, and every item was checked here; an
        // error now (memory) fails this step's requests, whose slots start over.
        for (Slot* s : owners) {
            restart(*s);
            fail(*s, std::string("evaluation failed: ") + e.what(), 500);
        }
        return true;
    }
    ++steps_;
    ++metrics_.batch_steps;
    metrics_.batch_rows += uint64_t(rows);
    metrics_.batch_sequences += items.size();
    metrics_.last_batch_sequences = int64_t(items.size());
    for (size_t i = 0; i < items.size(); ++i) {
        Slot& s = *owners[i];
        ++s.version;
        const bool decoded = s.gen->last_was_decode();
        s.gen->evaluated();
        after_eval(s, decoded, items[i].want != model::Logits::None, int64_t(items[i].tokens.size()));
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
            for (auto& sl : slots_)
                if (sl.fresh) {
                    sl.fresh = false;
                    try {
                        start(sl);
                    } catch (const std::exception& e) {
                        // This request only (e.g. memory for a checkpoint): its slot starts over.
                        restart(sl);
                        fail(sl, std::string("cannot start: ") + e.what(), 500);
                    }
                }
            step();
        } catch (const std::exception& e) {
            // A last resort (a writer or sampler error): end every request on the engine.
            log::error("ds4-server: scheduler step failed: {}", e.what());
            for (auto& s : slots_)
                if (s.job) {
                    // In the request's API shape where its writer still works (an empty 500
                    // tells a client nothing); a bare 500 where it does not.
                    try {
                        s.out->fail(std::string("internal error: ") + e.what(), 500);
                    } catch (const std::exception&) {
                        s.job->channel->close(500);
                    }
                    restart(s);
                    release(s);
                }
        }
    }
}

std::string Scheduler::prometheus() const {
    if (!disk_) return {};
    const auto st = disk_->stats();
    std::string out;
    auto metric = [&](const char* name, const char* type, const char* help, auto value) {
        out += fmt::format("# HELP {} {}\n# TYPE {} {}\n{} {}\n", name, help, name, type, name, value);
    };
    metric("ds4_kv_disk_hits_total", "counter", "Disk KV checkpoints loaded.", st.hits);
    metric("ds4_kv_disk_misses_total", "counter", "Disk KV lookups that found nothing usable.", st.misses);
    metric("ds4_kv_disk_refused_total", "counter",
           "Checkpoints read but not used (control-token layout or state mismatch).", kv_refused_.load());
    metric("ds4_kv_disk_read_bytes_total", "counter", "Bytes of checkpoints loaded.", st.bytes_read);
    metric("ds4_kv_disk_written_bytes_total", "counter", "Bytes of checkpoints written.", st.bytes_written);
    metric("ds4_kv_disk_stores_total", "counter", "Checkpoints written.", st.stores);
    metric("ds4_kv_disk_store_failures_total", "counter", "Checkpoint writes that failed (I/O, full disk).",
           st.store_failures);
    metric("ds4_kv_disk_stores_skipped_total", "counter", "Checkpoints not written (too big, no room, saving off).",
           st.stores_skipped);
    metric("ds4_kv_disk_save_seconds_total", "counter", "Time spent saving checkpoints.", kv_save_us_.load() / 1e6);
    metric("ds4_kv_disk_evictions_total", "counter", "Checkpoints removed for the budget.", st.evictions);
    out += "# HELP ds4_kv_disk_load_failures_total Damaged checkpoints removed, by cause.\n"
           "# TYPE ds4_kv_disk_load_failures_total counter\n";
    out += fmt::format("ds4_kv_disk_load_failures_total{{cause=\"checksum\"}} {}\n", st.load_failures_checksum);
    out += fmt::format("ds4_kv_disk_load_failures_total{{cause=\"truncated\"}} {}\n", st.load_failures_truncated);
    out += fmt::format("ds4_kv_disk_load_failures_total{{cause=\"foreign\"}} {}\n", st.load_failures_foreign);
    out += fmt::format("ds4_kv_disk_load_failures_total{{cause=\"io\"}} {}\n", st.load_failures_io);
    metric("ds4_kv_disk_files", "gauge", "Checkpoint files.", st.files);
    metric("ds4_kv_disk_bytes", "gauge", "Bytes of checkpoint files.", st.total_bytes);
    metric("ds4_kv_disk_saving", "gauge", "1 while saving is enabled (0 after a full disk).",
           disk_->saving_enabled() ? 1 : 0);
    return out;
}

}  // namespace ds4::server
