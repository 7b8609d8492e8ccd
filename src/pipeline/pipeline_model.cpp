#include "pipeline/pipeline_model.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <random>

#include "common/error.h"
#include "common/log.h"
#include "dist/activation.h"
#include "model/blocks/batch_check.h"
#include "model/blocks/hidden_out.h"
#include "model/state_file.h"

namespace ds4::pipeline {

// A sequence of the pipeline: the coordinator's own layers' state, the session id the workers
// key their state by, and the token hash of what the route holds.
class PipelineSequence final : public model::Sequence {
public:
    PipelineSequence(const PipelineModel& owner, std::unique_ptr<model::Sequence> local, model::SequenceOptions opt)
        : Sequence(opt), owner_(owner), local_(std::move(local)) {
        std::random_device rd;
        session_ = uint64_t(rd()) << 32 | rd();
    }
    bool can_rewind(int64_t n) const override { return !dirty_ && local_->can_rewind(n); }
    void rewind(int64_t n) override {
        if (!can_rewind(n)) fail("cannot rewind the sequence to {} tokens", n);
        local_->rewind(n);
        tokens_.resize(size_t(n));
        hash_ = dist::token_hash(dist::kTokenHashInit, tokens_);
    }
    void clear() override {
        local_->clear();
        tokens_.clear();
        hash_ = dist::kTokenHashInit;
        dirty_ = false;
    }
    int64_t state_bytes() const override { return local_->state_bytes(); }
    int64_t state_bytes_used() const override { return local_->state_bytes_used(); }
    std::unique_ptr<model::Sequence> clone() const override {
        // A new timeline: its own session id, so the workers' state for this one is left alone
        // (the first call on the clone replays its tokens).
        auto c = std::make_unique<PipelineSequence>(owner_, local_->clone(), opt_);
        c->tokens_ = tokens_;  // on_route_ stays false: the workers know no such session
        c->hash_ = hash_;
        c->dirty_ = dirty_;
        return c;
    }
    void assign(const model::Sequence& other) override {
        const auto* o = dynamic_cast<const PipelineSequence*>(&other);
        if (!o || &o->owner_ != &owner_) fail("assign: a sequence of another model");
        local_->assign(*o->local_);
        tokens_ = o->tokens_;
        hash_ = o->hash_;
        dirty_ = o->dirty_;
        on_route_ = false;  // the workers' state for this session is not the other's
    }

    const PipelineModel& owner_;
    std::unique_ptr<model::Sequence> local_;
    uint64_t session_ = 0;
    uint64_t hash_ = dist::kTokenHashInit;
    // The local state or the workers' may be ahead of tokens_ (a call failed half-way): the next
    // call replays from position 0.
    bool dirty_ = false;
    // The workers have held this session's tokens (a WORK of it succeeded, or its state was
    // pushed); a clone or an assigned sequence has not: a batched WORK would fail its prefix.
    bool on_route_ = false;

    void loaded(const std::vector<int32_t>& t, uint64_t hash) {
        tokens_ = t;
        hash_ = hash;
        dirty_ = false;
        on_route_ = true;
    }
    void append(std::span<const int32_t> t, uint64_t hash) {
        tokens_.insert(tokens_.end(), t.begin(), t.end());
        hash_ = hash;
        on_route_ = true;
    }
};

namespace {

std::string hop_name(const Hop& h) {
    return fmt::format("{}:{} (layers {}{})", h.entry.host, h.entry.port, h.entry.layer_start,
                       h.has_output ? ":output" : fmt::format(":{}", h.entry.layer_end));
}

}  // namespace

PipelineModel::PipelineModel(std::unique_ptr<model::Model> local, const std::string& path,
                             const model::OpenOptions& open, const DistOptions& dist)
    : Model(1), local_(std::move(local)), info_(local_->info()), dist_(dist) {
    if (!dist_.key_file.empty()) key_ = dist::load_key(dist_.key_file);
    info_.range = model::LayerRange::all(info_.n_layer);
    coord_ = std::make_unique<Coordinator>(local_->info(), dist_.listen_host, uint16_t(dist_.listen_port), key_,
                                           dist_.debug);
    const Route r = coord_->wait_for_route(dist_.route_timeout_s);
    if (!r.worker_head && !local_->info().range.output) {
        // No worker holds the output head: hold it here (the file must have it).
        model::OpenOptions o = open;
        o.layers = fmt::format("{}:output", info_.n_layer - 1);
        try {
            head_model_ = model::open(path, o);
        } catch (const Error& e) {
            fail("no worker holds the output head and the coordinator cannot load it: {}", e.what());
        }
        head_seq_ = head_model_->new_sequence({.ctx = 1});
    }
}

PipelineModel::~PipelineModel() = default;

std::unique_ptr<model::Sequence> PipelineModel::new_sequence(const model::SequenceOptions& opt) const {
    // Checked against the workers of the route now; a worker that registers later is checked by
    // its own context on each WORK.
    Route route;
    try {
        route = coord_->route();
    } catch (const Error&) {
    }
    for (const Hop& h : route.hops)
        if (h.ctx_size < opt.ctx)
            fail("the worker {} holds a context of {} tokens, less than {} (start it with --ctx {})", hop_name(h),
                 h.ctx_size, opt.ctx, opt.ctx);
    return std::make_unique<PipelineSequence>(*this, local_->new_sequence(opt), opt);
}

void PipelineModel::embed(model::Batch, float*) { fail("embed: a pipeline runs its stages through eval()"); }
void PipelineModel::eval_layers(model::Batch, float*) {
    fail("eval_layers: a pipeline runs its stages through eval()");
}
void PipelineModel::head(model::Batch, const float*) { fail("head: a pipeline runs its stages through eval()"); }

namespace {

// A fresh authenticated data connection to one hop, for the snapshot frames.
std::unique_ptr<dist::Connection> connect_hop(const Hop& h, const dist::DistKey& key) {
    try {
        dist::Socket s = dist::connect_to(h.entry.host, uint16_t(h.entry.port));
        dist::authenticate_connector(s, key, dist::Channel::data);
        return std::make_unique<dist::Connection>(std::move(s));
    } catch (const dist::TransportError& e) {
        fail("route incomplete: {}", e.what());
    }
}

template <class T>
T expect_frame(dist::Connection& c, const Hop& h, const char* what) {
    dist::Message m;
    try {
        m = c.recv_message(dist::peer_timeout());
    } catch (const dist::TransportError& e) {
        fail("route incomplete: {}", e.what());
    }
    if (auto* e = std::get_if<dist::ErrorFrame>(&m)) fail("{}", e->message);
    auto* t = std::get_if<T>(&m);
    if (!t) fail("the worker {} answered a snapshot request without {}", hop_name(h), what);
    return std::move(*t);
}

}  // namespace

// The whole-model state: the coordinator's range saved here, each worker's range fetched with
// SNAPSHOT_SAVE_REQ (BEGIN, CHUNKs, DONE), merged in layer order (docs/STATE_FORMAT.md).
std::vector<uint8_t> PipelineModel::save_state(const model::Sequence& seq, std::span<const float> logits) const {
    const auto* ps = dynamic_cast<const PipelineSequence*>(&seq);
    if (!ps || &ps->owner_ != this) fail("save_state: a sequence of another model");
    std::lock_guard lk(mu_);
    if (ps->dirty_) fail("save_state: the sequence is out of step with the workers (a call failed); evaluate it first");
    const Route route = coord_->route();
    if (route.upstream) fail("save_state: an upstream ds4 worker's session state is in its own format, not ours");
    std::vector<std::vector<uint8_t>> parts;
    parts.push_back(local_->save_state(*ps->local_));
    for (const Hop& h : route.hops) {
        auto c = connect_hop(h, key_);
        dist::SnapshotSaveReq q;
        q.model_id = model_id(info_);
        q.session_id = ps->session_;
        q.request_id = next_request_++;
        q.token_hash = ps->hash_;
        q.token_count = uint32_t(ps->pos());
        q.layer_start = h.entry.layer_start;
        q.layer_end = h.entry.layer_end;
        try {
            c->send(dist::encode(q));
        } catch (const dist::TransportError& e) {
            fail("route incomplete: {}", e.what());
        }
        const auto b = expect_frame<dist::SnapshotBegin>(*c, h, "SNAPSHOT_BEGIN");
        if (b.status != dist::kStatusOk)
            fail("the worker {} cannot save the session: {} (evaluate the sequence again first)", hop_name(h),
                 b.message);
        // The buffer grows with the chunks actually received, never to the declared size up
        // front (a worker's range may hold far more state than the coordinator's: no tighter
        // bound is known here); the declared size only has to be sane.
        if (b.payload_bytes > (uint64_t(1) << 40))
            fail("the worker {} declares a state of {} bytes", hop_name(h), b.payload_bytes);
        std::vector<uint8_t> state;
        while (state.size() < b.payload_bytes) {
            const auto ch = expect_frame<dist::SnapshotChunk>(*c, h, "SNAPSHOT_CHUNK");
            if (ch.request_id != q.request_id || state.size() + ch.data.size() > b.payload_bytes)
                fail("the worker {} sent a snapshot chunk out of turn", hop_name(h));
            state.insert(state.end(), ch.data.begin(), ch.data.end());
        }
        const auto d = expect_frame<dist::SnapshotDone>(*c, h, "SNAPSHOT_DONE");
        if (d.status != dist::kStatusOk) fail("the worker {} failed to save: {}", hop_name(h), d.message);
        parts.push_back(std::move(state));
    }
    std::vector<std::span<const uint8_t>> spans(parts.begin(), parts.end());
    return model::merge_range_states(spans, info_.range, logits);
}

// Cuts a whole-model state by the route: each worker's range goes out with
// SNAPSHOT_LOAD_BEGIN + CHUNKs (DONE says whether it loaded), then the coordinator's own.
void PipelineModel::load_state(std::span<const uint8_t> bytes, model::Sequence& seq,
                               std::vector<float>* logits) const {
    auto* ps = dynamic_cast<PipelineSequence*>(&seq);
    if (!ps || &ps->owner_ != this) fail("load_state: a sequence of another model");
    std::lock_guard lk(mu_);
    const model::StateReader whole(bytes, "state");
    const model::StateHeader& h = whole.header();
    if (h.range != info_.range)
        fail("state: holds layers {}; a pipeline loads whole-model states", h.range.str());
    if (h.architecture != info_.architecture || h.metadata_hash != info_.metadata_hash)
        fail("state: saved by another model");
    if (int64_t(h.tokens.size()) > ps->options().ctx)
        fail("state: {} tokens do not fit a context of {}", h.tokens.size(), ps->options().ctx);
    const auto local_part = model::cut_range_state(bytes, local_->info().range);
    const uint64_t hash = dist::token_hash(dist::kTokenHashInit, h.tokens);
    const Route route = coord_->route();
    if (route.upstream) fail("load_state: an upstream ds4 worker's session state is in its own format, not ours");
    for (const Hop& hop : route.hops) {
        const model::LayerRange r{hop.entry.layer_start, hop.entry.layer_end, hop.has_output};
        const auto part = model::cut_range_state(bytes, r);
        auto c = connect_hop(hop, key_);
        dist::SnapshotLoadBegin b;
        b.req.model_id = model_id(info_);
        b.req.session_id = ps->session_;
        b.req.request_id = next_request_++;
        b.req.token_hash = hash;
        b.req.token_count = uint32_t(h.tokens.size());
        b.req.layer_start = r.first;
        b.req.layer_end = r.last;
        b.payload_bytes = part.size();
        b.tokens = h.tokens;
        try {
            c->send(dist::encode(b));
            for (size_t at = 0; at < part.size(); at += dist::kSnapshotChunkBytes) {
                dist::SnapshotChunk ch;
                ch.request_id = b.req.request_id;
                const size_t n = std::min<size_t>(dist::kSnapshotChunkBytes, part.size() - at);
                ch.data.assign(part.begin() + ptrdiff_t(at), part.begin() + ptrdiff_t(at + n));
                c->send(dist::encode(ch));
            }
        } catch (const dist::TransportError& e) {
            fail("route incomplete: {}", e.what());
        }
        const auto d = expect_frame<dist::SnapshotDone>(*c, hop, "SNAPSHOT_DONE");
        if (d.status != dist::kStatusOk) fail("the worker {} could not load the state: {}", hop_name(hop), d.message);
    }
    // The coordinator's part last (unchanged if it fails; the workers' sessions then differ from
    // this sequence's hash, and its next call replays).
    local_->load_state(local_part, *ps->local_);
    ps->loaded(h.tokens, hash);
    if (logits) *logits = h.logits;
}

void PipelineModel::eval(model::Batch b) {
    // Everything is checked before anything runs, as the local models do (the same checks).
    blocks::check_batch(b, info_.n_vocab, /*advancing=*/true, [this](const model::Sequence& s) {
        const auto* ps = dynamic_cast<const PipelineSequence*>(&s);
        return ps && &ps->owner_ == this;
    });
    blocks::check_draft_outputs(b, info_.range);
    std::lock_guard lk(mu_);
    if (eval_batched(b)) return;
    for (const model::BatchItem& it : b) eval_item(*static_cast<PipelineSequence*>(it.seq), it);
}

bool PipelineModel::eval_batched(model::Batch b) {
    if (b.size() < 2) return false;
    Route route;
    try {
        route = coord_->route();
    } catch (const Error&) {
        return false;  // the one-by-one path says what is missing
    }
    if (!route.batched) return false;
    // What cannot go in a batched WORK runs alone first: a drafter's rows, an item longer than
    // one WORK, a sequence to replay or one the workers never held (a clone with history: its
    // prefix check would fail the whole batch).
    std::vector<model::BatchItem> together;
    for (const model::BatchItem& it : b) {
        auto& ps = *static_cast<PipelineSequence*>(it.seq);
        if (ps.dirty_ || (!ps.on_route_ && ps.pos() > 0) || it.hidden_want != model::Logits::None ||
            !it.capture.empty() || (dist_.prefill_chunk > 0 && int64_t(it.tokens.size()) > dist_.prefill_chunk))
            eval_item(ps, it);
        else
            together.push_back(it);
    }
    // Groups of at most kMaxBatchItems sequences whose hidden states stay within half the
    // receivers' payload bound (a lone item over it goes alone, as it did before batching).
    const uint64_t row_bytes = uint64_t(info_.hidden_size) * dist_.activation_bits / 8;
    const model::Batch rest(together);
    for (size_t g = 0, len = 0; g < rest.size(); g += len) {
        uint64_t bytes = 0;
        for (len = 0; g + len < rest.size() && len < dist::kMaxBatchItems; ++len) {
            bytes += rest[g + len].tokens.size() * row_bytes;
            if (len > 0 && bytes > dist::kDefaultMaxPayload / 2) break;
        }
        const model::Batch group = rest.subspan(g, len);
        if (group.size() == 1) {
            eval_item(*static_cast<PipelineSequence*>(group[0].seq), group[0]);
            continue;
        }
        try {
            run_batch(route, group);
            continue;
        } catch (const StateMismatch&) {
        }
        // A worker holds another prefix of some session: each replays and runs alone.
        if (dist_.debug) log::info("ds4: dist: a worker's state differs for a batched call; running its items alone");
        for (const model::BatchItem& it : group) eval_item(*static_cast<PipelineSequence*>(it.seq), it);
    }
    return true;
}

void PipelineModel::run_batch(const Route& route, model::Batch b) {
    const int64_t H = info_.hidden_size, R = model::batch_rows(b);
    std::vector<model::BatchItem> local(b.size());
    for (size_t i = 0; i < b.size(); ++i) {
        auto& ps = *static_cast<PipelineSequence*>(b[i].seq);
        local[i] = {ps.local_.get(), b[i].tokens};
        ps.dirty_ = true;  // until the answer is in
    }
    dist::Work w;
    w.model_id = model_id(info_);
    w.request_id = next_request_++;
    w.layer_start = route.hops[0].entry.layer_start;
    w.layer_end = route.hops[0].entry.layer_end;
    w.input_hc_bits = dist_.activation_bits;
    bool logits = false;
    for (const model::BatchItem& it : b) {
        const auto& ps = *static_cast<const PipelineSequence*>(it.seq);
        dist::WorkItem item{ps.session_, ps.hash_, dist::token_hash(ps.hash_, it.tokens), uint32_t(ps.pos()),
                            uint32_t(it.tokens.size()), 0};
        if (it.want != model::Logits::None && route.worker_head)
            item.flags = dist::kWorkOutputLogits | (it.want == model::Logits::All ? dist::kWorkAllLogits : 0);
        logits = logits || it.want != model::Logits::None;
        w.batch.push_back(item);
        w.tokens.insert(w.tokens.end(), it.tokens.begin(), it.tokens.end());
    }
    w.session_id = w.batch[0].session_id;
    w.prefix_hash = w.batch[0].prefix_hash;
    w.result_hash = w.batch[0].result_hash;
    w.pos0 = w.batch[0].pos0;
    w.flags = dist::kWorkInputHc | dist::kWorkBatch |
              (!logits ? dist::kWorkAckOnly : route.worker_head ? dist::kWorkOutputLogits : 0);
    // Here: the embedding and this process's layers, all the rows at once.
    std::vector<float> hidden(static_cast<size_t>(R * H));
    local_->embed(model::Batch(local), hidden.data());
    local_->eval_layers(model::Batch(local), hidden.data());
    w.input_hc = dist::encode_activations(hidden, w.input_hc_bits);
    w.route = route.entries();
    w.route_return = dist::RouteReturn{dist::kRouteReturnUpstream, "", 0};
    const auto sent = std::chrono::steady_clock::now();
    dist::Result r;
    try {
        send_work(route, w);
        r = recv_result(route, w.request_id);
    } catch (...) {
        data_.reset();  // an answer still in flight would be read by the next call
        throw;
    }
    if (dist_.debug)
        log::info("ds4: dist: batch of {} sequences, {} rows: round trip {:.0f} us", b.size(), (long long)R,
                  std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - sent).count());
    if (r.status != dist::kStatusOk) fail("the route answered with status {}", r.status);
    if (r.result_hash != w.result_hash) fail("the route answered for another token prefix (result hash differs)");
    put_batch_logits(route, b, r);
    for (size_t i = 0; i < b.size(); ++i) {
        auto& ps = *static_cast<PipelineSequence*>(b[i].seq);
        ps.append(b[i].tokens, w.batch[i].result_hash);
        ps.dirty_ = false;
    }
}

// Each item's logits from a batched WORK's answer: the route's, one after another in item order,
// or the head run here on the returned hidden state.
void PipelineModel::put_batch_logits(const Route& route, model::Batch b, const dist::Result& r) {
    const int64_t H = info_.hidden_size, V = info_.n_vocab, R = model::batch_rows(b);
    const bool logits = std::any_of(b.begin(), b.end(), [](const model::BatchItem& it) { return it.want != model::Logits::None; });
    if (!logits) {
        if (r.kind != dist::ResultKind::ack) fail("the route answered an ACK-only request with a payload");
        return;
    }
    if (!route.worker_head) {
        if (r.kind != dist::ResultKind::hidden_state) fail("the route returned no hidden state for the output head");
        std::vector<float> last_hidden(static_cast<size_t>(R * H));
        dist::decode_activations(r.payload, r.payload_bits, last_hidden);  // checks the size
        int64_t row = 0;
        for (const model::BatchItem& it : b) {
            if (it.want != model::Logits::None) {
                model::BatchItem hi{head_seq_.get(), it.tokens, it.want, it.logits};
                head_model_->head(model::Batch(&hi, 1), last_hidden.data() + row * H);
            }
            row += int64_t(it.tokens.size());
        }
        return;
    }
    int64_t rows = 0;
    for (const model::BatchItem& it : b)
        rows += it.want == model::Logits::All ? int64_t(it.tokens.size()) : it.want == model::Logits::Last;
    if (r.kind != dist::ResultKind::logits || int64_t(r.payload.size()) != rows * V * 4)
        fail("the route returned {} bytes of logits; expected {} rows of {}", r.payload.size(), rows, V);
    const uint8_t* p = r.payload.data();
    for (const model::BatchItem& it : b) {
        const int64_t n = it.want == model::Logits::All ? int64_t(it.tokens.size()) : it.want == model::Logits::Last;
        std::memcpy(it.logits, p, size_t(n * V) * 4);
        p += n * V * 4;
    }
}

void PipelineModel::eval_item(PipelineSequence& ps, const model::BatchItem& it) {
    if (ps.dirty_) replay(ps);
    try {
        run_span(ps, it, false);
        return;
    } catch (const StateMismatch&) {
    }
    if (dist_.debug)
        log::info("ds4: dist: a worker's state for session {:016x} differs; replaying {} tokens",
                  (unsigned long long)ps.session_, ps.tokens().size());
    replay(ps);
    try {
        run_span(ps, it, false);
    } catch (const StateMismatch&) {
        ps.dirty_ = true;
        fail("a worker's state still differs after replaying the session");
    }
}

void PipelineModel::replay(PipelineSequence& ps) {
    const std::vector<int32_t> history = ps.tokens();
    ps.clear();
    ps.dirty_ = true;
    if (!history.empty()) {
        try {
            run_span(ps, model::BatchItem{&ps, history}, true);
        } catch (const StateMismatch&) {
            fail("a worker refused the replay of session {:016x}", ps.session_);
        }
    }
    ps.dirty_ = false;
}

void PipelineModel::send_work(const Route& route, const dist::Work& w) {
    const Hop& first = route.hops.front();
    try {
        if (!data_ || !data_->open() || data_generation_ != route.generation) {
            data_.reset();
            dist::Socket s = dist::connect_to(first.entry.host, uint16_t(first.entry.port));
            dist::authenticate_connector(s, key_, dist::Channel::data);
            data_ = std::make_unique<dist::Connection>(std::move(s));
            data_generation_ = route.generation;
        }
        data_->send(dist::encode(w));
    } catch (const dist::TransportError& e) {
        fail("route incomplete: {}", e.what());
    }
}

dist::Result PipelineModel::recv_result(const Route& route, uint64_t request_id) {
    dist::Message m;
    try {
        m = data_->recv_message(dist_.timeout_s);  // a stopped or vanished hop: no answer
    } catch (const dist::TimeoutError&) {
        // Any hop may be the one that is silent: the answer comes back through all of them.
        fail("route incomplete: no answer from the route ({}) for {:g} s (--dist-timeout): a worker stopped, "
             "hangs, or its host is unreachable", route.str(), dist_.timeout_s);
    } catch (const dist::TransportError& e) {
        fail("route incomplete: {}", e.what());
    } catch (const dist::ProtocolError& e) {
        fail("route incomplete: {}", e.what());
    }
    if (auto* e = std::get_if<dist::ErrorFrame>(&m)) fail("{}", e->message);
    auto* r = std::get_if<dist::Result>(&m);
    if (!r) fail("the worker {} answered WORK with another frame", hop_name(route.hops.front()));
    // A state mismatch may overtake requests still in flight (a hop answers it at once).
    if (dist::result_is_state_mismatch(*r)) throw StateMismatch{};
    // Upstream's error shape: status 1 and the message.
    if (r->status != dist::kStatusOk && !r->payload.empty())
        fail("the route refused the work: {}", dist::result_error_message(*r));
    if (r->request_id != request_id)
        fail("the route answered request {} where {} was next", r->request_id, request_id);
    return std::move(*r);
}

void PipelineModel::check_dialect(const Route& route, const model::BatchItem& it) const {
    if (!route.upstream) return;
    for (const Hop& h : route.hops)
        if (h.dialect == Dialect::ours_legacy)
            fail("the worker {} is an older ds4 of ours, which does not speak upstream's dialect that the "
                 "upstream worker on this route needs: update it", hop_name(h));
    if (!it.capture.empty() || it.hidden_want != model::Logits::None)
        fail("a route with an upstream ds4 worker cannot return draft rows (speculative decoding on the "
             "coordinator); run without a drafter");
}

uint32_t PipelineModel::upstream_flags(const Route& route, uint32_t ours) {
    // Upstream's OUTPUT_LOGITS says "this hop holds the head" (its route entry's flag), set even
    // with ACK_ONLY; each hop sets it for the next one as it forwards.
    uint32_t f = ours & (dist::kWorkInputHc | dist::kWorkResetSession | dist::kWorkAckOnly);
    if (route.hops.front().entry.flags & dist::kRouteOutputLogits) f |= dist::kWorkOutputLogits;
    return f;
}

void PipelineModel::run_span(PipelineSequence& ps, const model::BatchItem& it, bool reset) {
    try {
        run_span_unguarded(ps, it, reset);
    } catch (...) {
        // Answers to requests still in flight would be read by the next call: start afresh.
        data_.reset();
        throw;
    }
}

// One WORK's share of a call.
struct PipelineModel::Chunk {
    uint64_t request_id = 0;
    int64_t b = 0, len = 0;
    bool logits = false;          // its logits are wanted (Last: it ends the call)
    bool payload_hidden = false;  // the route returns its last hidden state: the head or the drafter runs here
    int64_t draft_from = -1;      // its rows draft_from .. len-1 feed the drafter (-1: none)
    bool draft_hidden = false;    // the last hop returns their final hidden state in the draft rows
    std::vector<uint32_t> local, remote;  // the capture layers held here and by the workers
    uint64_t after = 0;           // the token hash after it
    std::chrono::steady_clock::time_point sent;
    // The WORK carries a draft request (the workers hold some of the rows asked for).
    bool asks_draft() const { return draft_from >= 0 && (draft_hidden || !remote.empty()); }
    // An answer with a payload or draft rows is read before the next chunk goes out.
    bool waits() const { return logits || payload_hidden || asks_draft(); }
};

PipelineModel::Chunk PipelineModel::plan_chunk(const Route& route, const model::BatchItem& it, int64_t b,
                                               int64_t len) const {
    const int64_t n = int64_t(it.tokens.size());
    Chunk c;
    c.b = b;
    c.len = len;
    c.logits = it.want == model::Logits::All || (it.want == model::Logits::Last && b + len == n);
    // The drafter's rows: hidden_from .. n-1, or the last row alone (a Last hidden state).
    const int64_t lo = it.capture.empty() && it.hidden_want == model::Logits::Last ? n - 1 : it.hidden_from;
    const bool draft = (it.hidden_want != model::Logits::None || !it.capture.empty()) && b + len > lo;
    if (draft) c.draft_from = std::max(lo, b) - b;
    for (uint32_t l : it.capture) (local_->info().range.contains(l) ? c.local : c.remote).push_back(l);
    if (!draft) {
        c.local.clear();
        c.remote.clear();
    }
    const bool hidden = draft && it.hidden_want != model::Logits::None;
    if (!route.hops.empty()) {
        c.payload_hidden = !route.worker_head && (c.logits || hidden);
        c.draft_hidden = route.worker_head && hidden;
    }
    return c;
}

namespace {

// Copies rows a .. a+m-1 of the call (absolute in the item) of one layer's output (k: its index
// in it.capture; -1: the final hidden state) into the item's buffers (model.h BatchItem).
void put_draft_rows(const model::BatchItem& it, int k, int64_t a, int64_t m, const float* rows, int64_t H) {
    const int64_t n = int64_t(it.tokens.size()), f = it.hidden_from;
    const size_t bytes = sizeof(float) * size_t(H);
    if (k >= 0) {
        std::memcpy(it.captured + (k * (n - f) + a - f) * H, rows, bytes * size_t(m));
    } else if (it.hidden_want == model::Logits::All) {
        std::memcpy(it.hidden + (a - f) * H, rows, bytes * size_t(m));
    } else if (it.hidden_want == model::Logits::Last && a + m == n) {
        std::memcpy(it.hidden, rows + (m - 1) * H, bytes);
    }
}

int capture_index(const model::BatchItem& it, uint32_t layer) {
    return int(std::find(it.capture.begin(), it.capture.end(), layer) - it.capture.begin());
}

}  // namespace

void PipelineModel::collect(const Route& route, PipelineSequence& ps, const model::BatchItem& it, const Chunk& c) {
    const int64_t H = info_.hidden_size, V = info_.n_vocab;
    const dist::Result r = recv_result(route, c.request_id);
    const auto part = it.tokens.subspan(size_t(c.b), size_t(c.len));
    float* out = it.want == model::Logits::All ? it.logits + c.b * V : it.logits;
    if (dist_.debug) {
        const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - c.sent).count();
        log::info("ds4: dist: pos {} n {}: round trip {:.0f} us", (long long)(ps.pos()), (long long)c.len, us);
        for (const dist::Telemetry& t : r.telemetry)
            log::info("ds4: dist:   hop {} layers {}:{} pos {} n {}: eval {} us, downstream wait {} us, "
                      "forward send {} us, in {} B, out {} B", t.route_index, t.layer_start, t.layer_end, t.pos0,
                      t.n_tokens, t.eval_usec, t.downstream_wait_usec, t.forward_send_usec, t.input_bytes,
                      t.output_bytes);
    }
    if (r.status != dist::kStatusOk) fail("the route answered with status {}", r.status);
    if (r.result_hash != c.after) fail("the route answered for another token prefix (result hash differs)");
    if (c.payload_hidden) {
        if (r.kind != dist::ResultKind::hidden_state) fail("the route returned no hidden state for the output head");
        std::vector<float> last_hidden(static_cast<size_t>(c.len * H));
        dist::decode_activations(r.payload, r.payload_bits, last_hidden);  // checks the size
        if (c.logits) {
            model::BatchItem hi{head_seq_.get(), part,
                                it.want == model::Logits::All ? model::Logits::All : model::Logits::Last, out};
            head_model_->head(model::Batch(&hi, 1), last_hidden.data());
        }
        if (c.draft_from >= 0)
            put_draft_rows(it, -1, c.b + c.draft_from, c.len - c.draft_from, last_hidden.data() + c.draft_from * H, H);
    } else if (c.logits) {
        const int64_t want_rows = it.want == model::Logits::All ? c.len : 1;
        if (r.kind != dist::ResultKind::logits || int64_t(r.payload.size()) != want_rows * V * 4)
            fail("the route returned {} bytes of logits; expected {} rows of {}", r.payload.size(), want_rows, V);
        std::memcpy(out, r.payload.data(), r.payload.size());
    } else if (r.kind != dist::ResultKind::ack) {
        fail("the route answered an ACK-only request with a payload");
    }
    if (!c.asks_draft() && r.draft) fail("the route returned draft rows nobody asked for");
    if (c.asks_draft()) {
        const int64_t m = c.len - c.draft_from;
        if (!r.draft || int64_t(r.draft->rows) != m || r.draft->layers != c.remote ||
            r.draft->hidden.empty() == c.draft_hidden)
            fail("the route returned other draft rows than asked (rows, layers or the hidden state)");
        std::vector<float> rows(static_cast<size_t>(m * H));
        if (c.draft_hidden) {
            dist::decode_activations(r.draft->hidden, r.draft->bits, rows);  // checks the size
            put_draft_rows(it, -1, c.b + c.draft_from, m, rows.data(), H);
        }
        const size_t per_layer = r.draft->captured.size() / std::max<size_t>(1, c.remote.size());
        for (size_t k = 0; k < c.remote.size(); ++k) {
            dist::decode_activations(std::span(r.draft->captured).subspan(k * per_layer, per_layer), r.draft->bits,
                                     rows);
            put_draft_rows(it, capture_index(it, c.remote[k]), c.b + c.draft_from, m, rows.data(), H);
        }
    }
    ps.append(part, c.after);
}

void PipelineModel::run_span_unguarded(PipelineSequence& ps, const model::BatchItem& it, bool reset) {
    const int64_t n = int64_t(it.tokens.size()), H = info_.hidden_size, V = info_.n_vocab;
    const Route route = coord_->route();  // "route incomplete" before any work
    check_dialect(route, it);
    // Upstream returns the last row's logits only: every row's are one WORK per token there.
    const bool row_by_row = route.upstream && route.worker_head && it.want == model::Logits::All;
    const int64_t chunk = row_by_row ? 1 : dist_.prefill_chunk > 0 ? dist_.prefill_chunk : n;
    ps.dirty_ = true;  // until every chunk's answer is in
    // Chunks sent whose answers are not read yet. Chunks that only need an ACK stay in flight
    // while the next chunk runs here (up to the window); a chunk that returns logits, a hidden
    // state or draft rows waits for its answer before the next one starts.
    std::deque<Chunk> inflight;
    const size_t window =
        dist_.prefill_window > 0 ? size_t(dist_.prefill_window) : std::min<size_t>(route.hops.size() + 2, 8);
    const int64_t pos_start = ps.pos();
    uint64_t hash = ps.hash_;
    auto collect_front = [&] {
        const Chunk c = std::move(inflight.front());
        inflight.pop_front();
        collect(route, ps, it, c);
    };

    for (int64_t b = 0; b < n; b += chunk) {
        const int64_t len = std::min(chunk, n - b);
        Chunk c = plan_chunk(route, it, b, len);
        const auto part = it.tokens.subspan(size_t(b), size_t(len));
        float* out = it.want == model::Logits::All ? it.logits + b * V : it.logits;
        // Here: the embedding, this process's layers (with their captures for the drafter).
        const int64_t m = c.draft_from >= 0 ? len - c.draft_from : 0;
        std::vector<float> hidden(static_cast<size_t>(len * H)), captured(c.local.size() * size_t(m * H));
        model::BatchItem li{ps.local_.get(), part};
        li.capture = c.local;
        li.captured = captured.data();
        li.hidden_from = std::max<int64_t>(0, c.draft_from);
        local_->embed(model::Batch(&li, 1), hidden.data());
        local_->eval_layers(model::Batch(&li, 1), hidden.data());
        for (size_t k = 0; k < c.local.size(); ++k)
            put_draft_rows(it, capture_index(it, c.local[k]), b + c.draft_from, m, captured.data() + k * m * H, H);
        c.after = dist::token_hash(hash, part);
        if (route.hops.empty()) {  // the coordinator holds the whole model
            li = {ps.local_.get(), part, c.logits ? (it.want == model::Logits::All ? model::Logits::All : model::Logits::Last)
                                                  : model::Logits::None, out};
            if (c.logits) local_->head(model::Batch(&li, 1), hidden.data());
            if (c.draft_from >= 0) put_draft_rows(it, -1, b + c.draft_from, m, hidden.data() + c.draft_from * H, H);
            ps.append(part, c.after);
            hash = c.after;
            continue;
        }
        dist::Work w;
        w.model_id = route.upstream ? upstream_model_id(info_) : model_id(info_);
        w.session_id = ps.session_;
        w.request_id = next_request_++;
        w.prefix_hash = hash;
        w.result_hash = c.after;
        w.pos0 = uint32_t(pos_start + b);
        w.layer_start = route.hops[0].entry.layer_start;
        w.layer_end = route.hops[0].entry.layer_end;
        w.flags = dist::kWorkInputHc | (reset && b == 0 ? dist::kWorkResetSession : 0);
        if (!c.logits && !c.payload_hidden) w.flags |= dist::kWorkAckOnly;
        else if (c.logits && route.worker_head)
            w.flags |= dist::kWorkOutputLogits | (it.want == model::Logits::All ? dist::kWorkAllLogits : 0);
        if (c.asks_draft()) {
            w.flags |= dist::kWorkDraftRows;
            w.draft = dist::DraftRequest{uint32_t(c.draft_from), c.draft_hidden, c.remote};
        }
        if (route.upstream) w.flags = upstream_flags(route, w.flags);
        w.input_hc_bits = dist_.activation_bits;
        w.tokens.assign(part.begin(), part.end());
        w.input_hc = dist::encode_activations(hidden, w.input_hc_bits);
        w.route = route.entries();
        w.route_return = dist::RouteReturn{dist::kRouteReturnUpstream, "", 0};
        c.request_id = w.request_id;
        if (c.waits())
            while (!inflight.empty()) collect_front();
        send_work(route, w);
        c.sent = std::chrono::steady_clock::now();
        if (dist_.debug)
            log::info("ds4: dist: sent pos {} n {}{} ({} in flight)", w.pos0, (long long)len,
                      c.waits() ? "" : " ack-only", inflight.size() + 1);
        const bool waits = c.waits();
        inflight.push_back(std::move(c));
        hash = inflight.back().after;
        while (!inflight.empty() && (waits || inflight.size() >= window)) collect_front();
    }
    while (!inflight.empty()) collect_front();
    ps.dirty_ = false;
}

std::unique_ptr<model::Model> open_model(const std::string& path, const model::OpenOptions& open,
                                         const DistOptions& dist) {
    if (const std::string why = dist_options_error(dist); !why.empty()) fail("{}", why);
    if (dist.role != Role::none) apply_dist_options(dist);
    switch (dist.role) {
        case Role::none:
            return model::open(path, open);
        case Role::worker:
            fail("--role worker serves layers; it runs no front end");
        case Role::coordinator:
            break;
    }
    model::OpenOptions o = open;
    o.layers = dist.layers;
    auto local = model::open(path, o);
    return std::make_unique<PipelineModel>(std::move(local), path, open, dist);
}

}  // namespace ds4::pipeline
