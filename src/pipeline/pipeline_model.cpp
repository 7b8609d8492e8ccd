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
        c->tokens_ = tokens_;
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
    }

    const PipelineModel& owner_;
    std::unique_ptr<model::Sequence> local_;
    uint64_t session_ = 0;
    uint64_t hash_ = dist::kTokenHashInit;
    // The local state or the workers' may be ahead of tokens_ (a call failed half-way): the next
    // call replays from position 0.
    bool dirty_ = false;

    void loaded(const std::vector<int32_t>& t, uint64_t hash) {
        tokens_ = t;
        hash_ = hash;
        dirty_ = false;
    }
    void append(std::span<const int32_t> t, uint64_t hash) {
        tokens_.insert(tokens_.end(), t.begin(), t.end());
        hash_ = hash;
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
    // The route returns logits only: hidden states stay on the process that computed them.
    if (blocks::wants_draft_outputs(b))
        fail("eval: hidden states and layer captures are not available over a pipeline");
    std::lock_guard lk(mu_);
    for (const model::BatchItem& it : b) eval_item(*static_cast<PipelineSequence*>(it.seq), it);
}

void PipelineModel::eval_item(PipelineSequence& ps, const model::BatchItem& it) {
    if (ps.dirty_) replay(ps);
    try {
        run_span(ps, it.tokens, it.want, it.logits, false);
        return;
    } catch (const StateMismatch&) {
    }
    if (dist_.debug)
        log::info("ds4: dist: a worker's state for session {:016x} differs; replaying {} tokens",
                  (unsigned long long)ps.session_, ps.tokens().size());
    replay(ps);
    try {
        run_span(ps, it.tokens, it.want, it.logits, false);
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
            run_span(ps, history, model::Logits::None, nullptr, true);
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
    if (r->status == dist::kStatusStateMismatch) throw StateMismatch{};
    if (r->request_id != request_id)
        fail("the route answered request {} where {} was next", r->request_id, request_id);
    return std::move(*r);
}

void PipelineModel::run_span(PipelineSequence& ps, std::span<const int32_t> tokens, model::Logits want, float* logits,
                             bool reset) {
    try {
        run_span_unguarded(ps, tokens, want, logits, reset);
    } catch (...) {
        // Answers to requests still in flight would be read by the next call: start afresh.
        data_.reset();
        throw;
    }
}

void PipelineModel::run_span_unguarded(PipelineSequence& ps, std::span<const int32_t> tokens, model::Logits want,
                                       float* logits, bool reset) {
    const int64_t n = int64_t(tokens.size()), H = info_.hidden_size, V = info_.n_vocab;
    const int64_t chunk = dist_.prefill_chunk > 0 ? dist_.prefill_chunk : n;
    const Route route = coord_->route();  // "route incomplete" before any work
    ps.dirty_ = true;  // until every chunk's answer is in
    // Chunks sent whose answers are not read yet. Chunks that only need an ACK stay in flight
    // while the next chunk runs here (up to the window); a chunk that returns logits or a
    // hidden state waits for its answer before the next one starts.
    struct InFlight {
        uint64_t request_id;
        int64_t b, len;
        bool rows;
        uint64_t after;
        std::chrono::steady_clock::time_point sent;
    };
    std::deque<InFlight> inflight;
    const size_t window =
        dist_.prefill_window > 0 ? size_t(dist_.prefill_window) : std::min<size_t>(route.hops.size() + 2, 8);
    const int64_t pos_start = ps.pos();
    uint64_t hash = ps.hash_;

    auto collect = [&] {
        const InFlight f = inflight.front();
        inflight.pop_front();
        const dist::Result r = recv_result(route, f.request_id);
        const auto part = tokens.subspan(size_t(f.b), size_t(f.len));
        float* out = want == model::Logits::All ? logits + f.b * V : logits;
        if (dist_.debug) {
            const double us =
                std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - f.sent).count();
            log::info("ds4: dist: pos {} n {}: round trip {:.0f} us", (long long)(pos_start + f.b),
                      (long long)f.len, us);
            for (const dist::Telemetry& t : r.telemetry)
                log::info("ds4: dist:   hop {} layers {}:{} pos {} n {}: eval {} us, downstream wait {} us, "
                          "forward send {} us, in {} B, out {} B", t.route_index, t.layer_start, t.layer_end,
                          t.pos0, t.n_tokens, t.eval_usec, t.downstream_wait_usec, t.forward_send_usec,
                          t.input_bytes, t.output_bytes);
        }
        if (r.status != dist::kStatusOk) fail("the route answered with status {}", r.status);
        if (r.result_hash != f.after) fail("the route answered for another token prefix (result hash differs)");
        if (!f.rows) {
            if (r.kind != dist::ResultKind::ack) fail("the route answered an ACK-only request with a payload");
        } else if (route.worker_head) {
            const int64_t want_rows = want == model::Logits::All ? f.len : 1;
            if (r.kind != dist::ResultKind::logits || int64_t(r.payload.size()) != want_rows * V * 4)
                fail("the route returned {} bytes of logits; expected {} rows of {}", r.payload.size(), want_rows, V);
            std::memcpy(out, r.payload.data(), r.payload.size());
        } else {
            if (r.kind != dist::ResultKind::hidden_state)
                fail("the route returned no hidden state for the output head");
            std::vector<float> last_hidden(static_cast<size_t>(f.len * H));
            dist::decode_activations(r.payload, r.payload_bits, last_hidden);  // checks the size
            model::BatchItem hi{head_seq_.get(), part,
                                want == model::Logits::All ? model::Logits::All : model::Logits::Last, out};
            head_model_->head(model::Batch(&hi, 1), last_hidden.data());
        }
        ps.append(part, f.after);
    };

    for (int64_t b = 0; b < n; b += chunk) {
        const int64_t len = std::min(chunk, n - b);
        const auto part = tokens.subspan(size_t(b), size_t(len));
        const bool last = b + len == n;
        const bool rows = want == model::Logits::All || (want == model::Logits::Last && last);
        float* out = want == model::Logits::All ? logits + b * V : logits;
        const model::Logits part_want = rows ? (want == model::Logits::All ? model::Logits::All : model::Logits::Last)
                                             : model::Logits::None;
        model::BatchItem li{ps.local_.get(), part, part_want, out};
        std::vector<float> hidden(static_cast<size_t>(len * H));
        local_->embed(model::Batch(&li, 1), hidden.data());
        local_->eval_layers(model::Batch(&li, 1), hidden.data());
        const uint64_t after = dist::token_hash(hash, part);
        if (route.hops.empty()) {  // the coordinator holds the whole model
            if (rows) local_->head(model::Batch(&li, 1), hidden.data());
            ps.append(part, after);
            hash = after;
            continue;
        }
        dist::Work w;
        w.model_id = model_id(info_);
        w.session_id = ps.session_;
        w.request_id = next_request_++;
        w.prefix_hash = hash;
        w.result_hash = after;
        w.pos0 = uint32_t(pos_start + b);
        w.layer_start = route.hops[0].entry.layer_start;
        w.layer_end = route.hops[0].entry.layer_end;
        w.flags = dist::kWorkInputHc | (reset && b == 0 ? dist::kWorkResetSession : 0);
        if (!rows) w.flags |= dist::kWorkAckOnly;
        else if (route.worker_head)
            w.flags |= dist::kWorkOutputLogits | (want == model::Logits::All ? dist::kWorkAllLogits : 0);
        w.input_hc_bits = dist_.activation_bits;
        w.tokens.assign(part.begin(), part.end());
        w.input_hc = dist::encode_activations(hidden, w.input_hc_bits);
        w.route = route.entries();
        w.route_return = dist::RouteReturn{dist::kRouteReturnUpstream, "", 0};
        if (rows)
            while (!inflight.empty()) collect();
        send_work(route, w);
        inflight.push_back({w.request_id, b, len, rows, after, std::chrono::steady_clock::now()});
        if (dist_.debug)
            log::info("ds4: dist: sent pos {} n {}{} ({} in flight)", w.pos0, (long long)len,
                      rows ? "" : " ack-only", inflight.size());
        hash = after;
        while (!inflight.empty() && (rows || inflight.size() >= window)) collect();
    }
    while (!inflight.empty()) collect();
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
