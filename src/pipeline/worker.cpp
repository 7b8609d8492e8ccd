#include "pipeline/worker.h"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <optional>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/log.h"
#include "dist/activation.h"
#include "dist/auth.h"
#include "dist/connection.h"
#include "dist/protocol.h"
#include "pipeline/coordinator.h"

namespace ds4::pipeline {
namespace {

using clock_type = std::chrono::steady_clock;
uint32_t usec_since(clock_type::time_point t0) {
    return uint32_t(std::min<int64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(clock_type::now() - t0).count(), UINT32_MAX));
}

struct Session {
    std::mutex mu;
    std::unique_ptr<model::Sequence> seq;
    uint64_t hash = dist::kTokenHashInit;
};

// The upstream side of a data connection: frames go up from the connection's own thread (the
// last hop's results, local errors) and from the relay thread of the next hop (Connection
// sends one frame at a time).
struct Upstream {
    explicit Upstream(dist::Socket s) : conn(std::move(s)) {}
    dist::Connection conn;
    void send(const std::vector<uint8_t>& frame) { conn.send(frame); }
};

// A connection to the next hop, and the thread that relays its answers upstream in order with
// this hop's telemetry record appended. WORK is forwarded without waiting for its answer, so
// several chunks can be in flight along the route (prefill pipelining).
class Downstream {
public:
    Downstream(dist::Socket s, std::string where, std::shared_ptr<Upstream> up)
        : conn_(std::move(s)), where_(std::move(where)), up_(std::move(up)) {
        thread_ = std::thread([this] { relay(); });
    }
    ~Downstream() {
        {
            std::lock_guard lk(mu_);
            stopping_ = true;
        }
        cv_.notify_all();
        conn_.shutdown();
        thread_.join();
    }
    const std::string& where() const { return where_; }
    bool dead() {
        std::lock_guard lk(mu_);
        return dead_;
    }
    // Sends f; its answer will be relayed with `tel` (and `draft`, this hop's captures, put in
    // front of the answer's draft rows). TransportError when the connection is broken (then
    // nothing will be relayed for f).
    void forward(const dist::Work& f, dist::Telemetry tel, std::optional<dist::DraftRows> draft = std::nullopt) {
        const auto t0 = clock_type::now();
        try {
            conn_.send(dist::encode(f));
        } catch (const dist::TransportError&) {
            conn_.shutdown();
            throw;
        }
        tel.forward_send_usec = usec_since(t0);
        std::lock_guard lk(mu_);
        // After the relay thread gave up nobody would answer: say so now.
        if (dead_) throw dist::TransportError(fmt::format("{} closed the connection", where_));
        pending_.push_back({f.request_id, tel, clock_type::now(), std::move(draft)});
        cv_.notify_all();
    }

private:
    struct Pending {
        uint64_t request_id;
        dist::Telemetry tel;
        clock_type::time_point sent;
        std::optional<dist::DraftRows> draft;
    };

    // This hop's captures in front of the downstream ones (the layers stay ascending).
    static void prepend_captures(dist::DraftRows& to, const dist::DraftRows& mine) {
        if (mine.layers.empty()) return;
        if (to.rows != mine.rows || to.bits != mine.bits)
            fail("its draft rows are {} at {} bits, ours {} at {}", to.rows, to.bits, mine.rows, mine.bits);
        to.layers.insert(to.layers.begin(), mine.layers.begin(), mine.layers.end());
        to.captured.insert(to.captured.begin(), mine.captured.begin(), mine.captured.end());
    }

    void relay() {
        std::string why;
        bool in_hand = false;  // a request taken from pending_ and not answered upstream yet
        try {
            for (;;) {
                dist::Message m = conn_.recv_message();
                Pending p;
                {
                    std::unique_lock lk(mu_);
                    // forward() registers a request right after sending it: wait for that.
                    cv_.wait(lk, [&] { return !pending_.empty() || stopping_; });
                    if (pending_.empty()) return;
                    p = pending_.front();
                    pending_.pop_front();
                    in_hand = true;
                }
                if (auto* e = std::get_if<dist::ErrorFrame>(&m)) {
                    up_->send(dist::encode(*e));  // relayed as it is
                    in_hand = false;
                    continue;
                }
                auto* r = std::get_if<dist::Result>(&m);
                if (!r) {
                    why = "it answered WORK with another frame";
                    break;
                }
                if (r->request_id != p.request_id) {
                    why = fmt::format("it answered request {} where {} was next", r->request_id, p.request_id);
                    break;
                }
                p.tel.downstream_wait_usec = usec_since(p.sent);
                r->telemetry.push_back(p.tel);
                if (r->draft && p.draft) prepend_captures(*r->draft, *p.draft);
                up_->send(dist::encode(*r));
                in_hand = false;
            }
        } catch (const Error& e) {
            why = e.what();
        }
        bool pending = false;
        {
            std::lock_guard lk(mu_);
            dead_ = true;
            pending = in_hand || !pending_.empty();
        }
        conn_.shutdown();
        // Requests in flight get no answer from here: fail the upstream connection, so its
        // sender learns at once (an idle connection that drops is only reconnected).
        if (pending) {
            try {
                up_->send(dist::encode(dist::ErrorFrame{
                    fmt::format("route incomplete: the next hop {} failed: {}", where_, why)}));
            } catch (const Error&) {
            }
            up_->conn.shutdown();
        }
    }

    dist::Connection conn_;
    std::string where_;
    std::shared_ptr<Upstream> up_;
    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<Pending> pending_;
    bool dead_ = false;
    bool stopping_ = false;
    std::thread thread_;
};

class Worker {
public:
    explicit Worker(const WorkerOptions& o) : opt_(o) {
        if (!o.dist.key_file.empty()) key_ = dist::load_key(o.dist.key_file);
        model::OpenOptions open = o.open;
        open.layers = o.dist.layers;
        model_ = model::open(o.model_path, open);
        if (o.on_open) attached_ = o.on_open(*model_);
        const auto& info = model_->info();
        if (info.range.first == 0)
            fail("--role worker holds layers {}; layer 0 (the embedding) belongs to the coordinator",
                 info.range.str());
        const std::string host = o.dist.listen_host.empty() ? "0.0.0.0" : o.dist.listen_host;
        const uint16_t port = o.dist.listen_port < 0 ? 0 : uint16_t(o.dist.listen_port);
        listener_ = std::make_unique<dist::Listener>(host, port);
        if (!key_.enabled() && !dist::is_loopback(host))
            log::warn("ds4: warning: worker listening on {} without --dist-key: anyone who can reach port {} "
                      "can send it work and read hidden states", host, unsigned(listener_->port()));
        log::info("ds4: worker layers {}, data port {}:{}, coordinator {}:{}", info.range.str(), host,
                  unsigned(listener_->port()), o.dist.coordinator_host, o.dist.coordinator_port);
    }

    int run() {
        std::thread control([this] { control_loop(); });
        for (;;) {
            dist::Socket s;
            try {
                s = listener_->accept();
            } catch (const dist::TransportError&) {
                break;  // shut down by a fatal control error
            }
            // A connection holds a thread from here; one that never authenticates (or, without
            // a key, never starts a frame) gives it back after the handshake timeout, and at
            // most kMaxPendingHandshakes wait at once.
            bool first_refusal = false;
            if (!handshakes_.try_acquire(&first_refusal)) {
                if (first_refusal)
                    log::warn("ds4: closing new data connections ({} first): {} are still in their handshake",
                              s.peer(), handshakes_.limit());
                continue;
            }
            auto sp = std::make_shared<dist::Socket>(std::move(s));
            std::thread([this, sp] { serve_data(std::move(*sp)); }).detach();
        }
        control.join();
        log::error("ds4: {}", fatal_);
        return 1;
    }

private:
    dist::Hello hello() const {
        const auto& info = model_->info();
        // Upstream's identity and quant profile, so that an upstream coordinator accepts it; a
        // coordinator of ours learns ours from the IDENTITY answer to its probe.
        dist::Hello h;
        h.model_id = upstream_model_id(info);
        h.quant_bits = routed_quant_bits(model_->file(), info.range);
        h.layer_start = info.range.first;
        h.layer_end = info.range.last;
        h.has_output = info.range.output;
        h.has_hidden = true;
        h.ctx_size = uint32_t(std::min<int64_t>(opt_.seq.ctx, UINT32_MAX));
        h.n_layers = info.n_layer;
        h.listen_port = listener_->port();
        h.model_name = upstream_model_name(info);
        return h;
    }

    // Registers, and again whenever the coordinator goes away; returns on a fatal refusal.
    void control_loop() {
        const auto& d = opt_.dist;
        bool waiting_noted = false;
        for (;;) {
            try {
                dist::Socket s = dist::connect_to(d.coordinator_host, uint16_t(d.coordinator_port));
                dist::authenticate_connector(s, key_, dist::Channel::control);
                auto up = std::make_shared<Upstream>(std::move(s));
                up->send(dist::encode(hello()));
                log::info("ds4: registered with the coordinator at {}:{}", d.coordinator_host,
                          d.coordinator_port);
                waiting_noted = false;
                // Upstream's coordinator sends the first hop's WORK on this connection too.
                std::unique_ptr<Downstream> down;
                for (;;) {
                    dist::Message m = up->conn.recv_message();
                    if (const auto* e = std::get_if<dist::ErrorFrame>(&m)) return stop(e->message);
                    const auto* w = std::get_if<dist::Work>(&m);
                    if (w && (w->flags & dist::kWorkIdentify)) {
                        // Version 2 (our extensions) only to a prober that reads it.
                        dist::Identity id = identity(model_->info());
                        if (w->pos0 >= dist::kIdentityVersion2) id.features = dist::kFeatureBatchedWork;
                        up->send(dist::encode(id));
                        continue;
                    }
                    if (w && !serve_frame(m, up, down)) break;
                }
            } catch (const dist::AuthError& e) {
                return stop(e.what());
            } catch (const dist::TransportError& e) {
                if (!waiting_noted)
                    log::warn("ds4: coordinator at {}:{} not reachable ({}); retrying", d.coordinator_host,
                              d.coordinator_port, e.what());
                waiting_noted = true;
            } catch (const Error& e) {
                log::warn("ds4: control connection: {}; registering again", e.what());
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }

    void stop(const std::string& why) {
        fatal_ = why;
        listener_->shutdown();
    }

    std::shared_ptr<Session> session(uint64_t id) {
        std::lock_guard lk(sessions_mu_);
        auto it = sessions_.find(id);
        if (it != sessions_.end()) {
            lru_.remove(id);
            lru_.push_front(id);
            return it->second;
        }
        while (sessions_.size() >= size_t(kMaxWorkerSessions)) {
            sessions_.erase(lru_.back());
            lru_.pop_back();
        }
        auto s = std::make_shared<Session>();
        s->seq = model_->new_sequence(opt_.seq);
        sessions_[id] = s;
        lru_.push_front(id);
        return s;
    }

    void serve_data(dist::Socket s) {
        try {
            dist::authenticate_acceptor(s, key_, dist::Channel::data);
        } catch (const Error& e) {
            handshakes_.release();
            log::warn("ds4: data connection: {}", e.what());
            return;
        }
        handshakes_.release();
        auto up = std::make_shared<Upstream>(std::move(s));
        std::unique_ptr<Downstream> down;
        for (;;) {
            dist::Message m;
            try {
                m = up->conn.recv_message();
            } catch (const dist::TransportError&) {
                return;  // the upstream side closed
            } catch (const Error& e) {
                log::warn("ds4: data connection: {}", e.what());
                return;
            }
            if (!serve_frame(m, up, down)) return;
        }
    }

    // WORK from an upstream coordinator carries upstream's model id (docs/DISTRIBUTED.md,
    // "Mixed clusters"): its errors go back as error RESULTs, its OUTPUT_LOGITS is per hop.
    bool upstream_dialect(const dist::Work& w) const { return w.model_id != model_id(model_->info()); }

    // One frame of a data connection (or a WORK on the control one); false: close it.
    bool serve_frame(dist::Message& m, const std::shared_ptr<Upstream>& up, std::unique_ptr<Downstream>& down) {
        try {
            if (auto* q = std::get_if<dist::SnapshotSaveReq>(&m)) {
                save_snapshot(up->conn, *q);
                return true;
            }
            if (auto* q = std::get_if<dist::SnapshotLoadBegin>(&m)) {
                load_snapshot(up->conn, *q);
                return true;
            }
        } catch (const Error& e) {
            log::warn("ds4: snapshot: {}", e.what());
            return false;
        }
        auto* w = std::get_if<dist::Work>(&m);
        if (!w) {
            up->conn.fail_and_close("expected WORK or a snapshot request on a data connection");
            return false;
        }
        try {
            if (auto answer = handle(*w, up, down)) up->send(*answer);
        } catch (const dist::TransportError&) {
            return false;
        } catch (const Error& e) {
            try {
                up->send(upstream_dialect(*w) ? error_result(w->request_id, e.what())
                                              : dist::encode(dist::ErrorFrame{e.what()}));
            } catch (const Error&) {
                return false;
            }
        }
        return true;
    }

    // Upstream's error shape: status 1, an ACK, the message as its payload.
    static std::vector<uint8_t> error_result(uint64_t request_id, const std::string& message) {
        dist::Result r;
        r.request_id = request_id;
        r.status = 1;
        r.payload.assign(message.begin(), message.end());
        return dist::encode(r);
    }

    std::string range_name() const { return model_->info().range.str(); }

    // SNAPSHOT_SAVE_REQ: this range's state of the session as BEGIN, CHUNKs, DONE; a status 1
    // BEGIN (no chunks) when the session does not hold the asked tokens.
    void save_snapshot(dist::Connection& c, const dist::SnapshotSaveReq& q) {
        const auto& info = model_->info();
        dist::SnapshotBegin b;
        b.req = q;
        std::vector<uint8_t> state;
        if (q.model_id != model_id(info) || q.layer_start != info.range.first || q.layer_end != info.range.last) {
            b.status = 2;
            b.message = fmt::format("worker layers {}: snapshot request for another model or range", range_name());
        } else {
            auto sess = session(q.session_id);
            std::lock_guard lk(sess->mu);
            if (sess->seq->pos() != int64_t(q.token_count) || sess->hash != q.token_hash) {
                b.status = dist::kStatusStateMismatch;
                b.message = fmt::format("worker layers {} holds {} tokens of the session, not the {} asked",
                                        range_name(), sess->seq->pos(), q.token_count);
            } else {
                state = model_->save_state(*sess->seq);
                b.tokens = sess->seq->tokens();
                b.payload_bytes = state.size();
            }
        }
        b.req.token_count = uint32_t(b.tokens.size());
        c.send(dist::encode(b));
        for (size_t at = 0; at < state.size(); at += dist::kSnapshotChunkBytes) {
            dist::SnapshotChunk ch;
            ch.request_id = q.request_id;
            const size_t n = std::min<size_t>(dist::kSnapshotChunkBytes, state.size() - at);
            ch.data.assign(state.begin() + ptrdiff_t(at), state.begin() + ptrdiff_t(at + n));
            c.send(dist::encode(ch));
        }
        dist::SnapshotDone d;
        d.request_id = q.request_id;
        d.status = b.status;
        c.send(dist::encode(d));
    }

    // SNAPSHOT_LOAD_BEGIN + CHUNKs: loads this range's state into the session; DONE with the
    // status (and the reason when it failed; the session is then unchanged).
    void load_snapshot(dist::Connection& c, const dist::SnapshotLoadBegin& b) {
        const auto& info = model_->info();
        // Bounded before anything is buffered: a state holds at most the sequence's memory
        // plus the token history.
        const uint64_t bound = uint64_t(model_->sequence_bytes(opt_.seq)) * 2 + 4 * uint64_t(opt_.seq.ctx) + (1u << 20);
        dist::SnapshotDone d;
        d.request_id = b.req.request_id;
        if (b.payload_bytes > bound)
            throw dist::ProtocolError(fmt::format("snapshot of {} bytes over this worker's bound of {}",
                                                  b.payload_bytes, bound));
        std::vector<uint8_t> state;
        while (state.size() < b.payload_bytes) {
            const dist::Message m = c.recv_message(dist::peer_timeout());  // the chunks follow at once
            const auto* ch = std::get_if<dist::SnapshotChunk>(&m);
            if (!ch || ch->request_id != b.req.request_id || state.size() + ch->data.size() > b.payload_bytes)
                throw dist::ProtocolError("snapshot load: expected the next SNAPSHOT_CHUNK");
            state.insert(state.end(), ch->data.begin(), ch->data.end());
        }
        try {
            if (b.req.model_id != model_id(info) || b.req.layer_start != info.range.first ||
                b.req.layer_end != info.range.last)
                fail("snapshot for another model or range");
            auto sess = session(b.req.session_id);
            std::lock_guard lk(sess->mu);
            model_->load_state(state, *sess->seq);  // unchanged on error
            sess->hash = dist::token_hash(dist::kTokenHashInit, sess->seq->tokens());
            if (sess->hash != b.req.token_hash || sess->seq->pos() != int64_t(b.req.token_count)) {
                sess->seq->clear();
                sess->hash = dist::kTokenHashInit;
                fail("the state holds other tokens than the request says");
            }
        } catch (const Error& e) {
            d.status = 2;
            d.message = fmt::format("worker layers {}: {}", range_name(), e.what());
        }
        c.send(dist::encode(d));
    }

    // The checks of a WORK that need no session (ds4::Error with the reason).
    void check_work(const dist::Work& w, const std::string& me) const {
        const auto& info = model_->info();
        const int64_t n = int64_t(w.tokens.size()), H = info.hidden_size;
        if (w.model_id != model_id(info) && w.model_id != upstream_model_id(info))
            fail("{}: WORK for another model (id {:08x})", me, w.model_id);
        if (upstream_dialect(w) && (w.flags & ~dist::kWorkUpstreamFlags))
            fail("{}: invalid distributed WORK flags {:#x} for upstream's dialect", me, w.flags);
        if (w.layer_start != info.range.first || w.layer_end != info.range.last)
            fail("{}: WORK for layers {}:{}", me, w.layer_start, w.layer_end);
        if (!w.route.empty()) {
            const auto& e = w.route[w.route_index];
            if (e.layer_start != w.layer_start || e.layer_end != w.layer_end)
                fail("{}: the route's entry {} is layers {}:{}", me, w.route_index, e.layer_start, e.layer_end);
            if (w.route_return && w.route_return->kind != dist::kRouteReturnUpstream)
                fail("{}: unsupported route return kind {}", me, w.route_return->kind);
        }
        const bool has_next = w.route_index + 1 < w.route.size();
        if (!(w.flags & dist::kWorkInputHc)) fail("{}: WORK without a hidden state", me);
        const uint32_t bits = w.input_hc_bits;
        if (w.input_hc.size() != dist::activation_bytes(size_t(n * H), bits))
            fail("{}: the hidden state is {} bytes; this model's is {} tokens x {} values x {} bits = {} bytes", me,
                 w.input_hc.size(), n, H, bits, n * H * bits / 8);
        const bool want_logits = (w.flags & dist::kWorkOutputLogits) && !(w.flags & dist::kWorkAckOnly);
        if (want_logits && !has_next && !info.range.output)
            fail("{}: logits asked of a worker without the output head", me);
        if ((w.flags & dist::kWorkAllLogits) && !(w.flags & dist::kWorkOutputLogits))
            fail("{}: ALL_LOGITS without OUTPUT_LOGITS", me);
        if (w.batch.empty() && dist::token_hash(w.prefix_hash, w.tokens) != w.result_hash)
            fail("{}: result_hash is not the hash of prefix and tokens", me);
        size_t at = 0;
        for (const dist::WorkItem& b : w.batch) {
            if (dist::token_hash(b.prefix_hash, std::span(w.tokens).subspan(at, b.n_tokens)) != b.result_hash)
                fail("{}: a batch item's result_hash is not the hash of its prefix and tokens", me);
            at += b.n_tokens;
        }
    }

    // Brings the session to the WORK's prefix (a reset, or a rewind to pos0); false when it
    // holds another one (the coordinator replays).
    static bool match_prefix(Session& sess, uint32_t pos0, uint64_t prefix_hash, bool reset) {
        model::Sequence& seq = *sess.seq;
        if (reset || pos0 == 0) {
            seq.clear();
            sess.hash = dist::kTokenHashInit;
        }
        if (seq.pos() == int64_t(pos0)) return sess.hash == prefix_hash;
        if (seq.pos() > int64_t(pos0) && seq.can_rewind(pos0)) {
            const auto& t = seq.tokens();
            if (dist::token_hash(dist::kTokenHashInit, std::span<const int32_t>(t.data(), pos0)) == prefix_hash) {
                seq.rewind(pos0);
                sess.hash = prefix_hash;
                return true;
            }
        }
        return false;
    }

    // The answer to a WORK whose session (or one of a batch's) holds another prefix.
    std::vector<uint8_t> mismatch(const dist::Work& w, const dist::Telemetry& tel) const {
        dist::Result r;
        r.request_id = w.request_id;
        r.result_hash = w.result_hash;
        r.status = dist::kStatusStateMismatch;
        if (upstream_dialect(w))
            r.payload.assign(dist::kUpstreamPrefixMismatch,
                             dist::kUpstreamPrefixMismatch + std::strlen(dist::kUpstreamPrefixMismatch));
        r.telemetry = {tel};
        return dist::encode(r);
    }

    // The draft request's layers this hop holds.
    std::vector<uint32_t> my_captures(const dist::Work& w) const {
        std::vector<uint32_t> mine;
        if (w.draft)
            for (uint32_t l : w.draft->capture)
                if (model_->info().range.contains(l)) mine.push_back(l);
        return mine;
    }

    // One WORK: the encoded answer (RESULT; an Error is sent up as an ERROR frame), or nothing
    // when it went on to the next hop, whose relay thread answers.
    std::optional<std::vector<uint8_t>> handle(dist::Work& w, const std::shared_ptr<Upstream>& up,
                                               std::unique_ptr<Downstream>& down) {
        if (!w.batch.empty()) return handle_batch(w, up, down);
        const auto& info = model_->info();
        const int64_t n = int64_t(w.tokens.size()), H = info.hidden_size;
        const std::string me = fmt::format("worker layers {}", range_name());
        check_work(w, me);
        const bool has_next = w.route_index + 1 < w.route.size();
        const uint32_t bits = w.input_hc_bits;

        auto sess = session(w.session_id);
        std::lock_guard lk(sess->mu);
        model::Sequence& seq = *sess->seq;
        dist::Telemetry tel{info.range.first, info.range.last, w.route_index, w.pos0, uint32_t(n), 0, 0, 0,
                            uint32_t(std::min<size_t>(w.input_hc.size(), UINT32_MAX)), 0};
        if (!match_prefix(*sess, w.pos0, w.prefix_hash, w.flags & dist::kWorkResetSession)) return mismatch(w, tel);
        if (seq.pos() + n > seq.options().ctx)
            fail("{}: context exceeded: {} tokens + {} new > the worker's context of {} (raise its --ctx)", me,
                 seq.pos(), n, seq.options().ctx);

        std::vector<float> hidden(static_cast<size_t>(n * H));
        dist::decode_activations(w.input_hc, bits, hidden);
        // The draft request's rows of this hop's layers (model.h BatchItem::capture).
        const std::vector<uint32_t> mine = my_captures(w);
        const int64_t from = w.draft ? int64_t(w.draft->hidden_from) : 0;
        std::vector<float> captured(mine.size() * size_t((n - from) * H));
        const auto t_eval = clock_type::now();
        model::BatchItem it{&seq, w.tokens};
        it.capture = mine;
        it.captured = captured.data();
        it.hidden_from = from;
        model_->eval_layers(model::Batch(&it, 1), hidden.data());
        sess->hash = w.result_hash;
        tel.eval_usec = usec_since(t_eval);
        std::optional<dist::DraftRows> draft;
        if (w.draft) draft = dist::DraftRows{uint32_t(n - from), bits, {}, mine, dist::encode_activations(captured, bits)};

        if (has_next) {
            forward(w, hidden, tel, std::move(draft), up, down);
            return std::nullopt;
        }
        model::BatchItem hi{&seq, w.tokens};
        if ((w.flags & dist::kWorkOutputLogits) && !(w.flags & dist::kWorkAckOnly))
            hi.want = (w.flags & dist::kWorkAllLogits) ? model::Logits::All : model::Logits::Last;
        return answer(w, std::span(&hi, 1), hidden, tel, std::move(draft));
    }

    // A batched WORK (flag kWorkBatch, ours): the rows of several sessions in one evaluation of
    // this range, forwarded as one WORK; nothing runs unless every session holds its prefix.
    std::optional<std::vector<uint8_t>> handle_batch(dist::Work& w, const std::shared_ptr<Upstream>& up,
                                                     std::unique_ptr<Downstream>& down) {
        static_assert(dist::kMaxBatchItems <= uint32_t(kMaxWorkerSessions), "a batch's sessions must all stay live");
        const auto& info = model_->info();
        const int64_t n = int64_t(w.tokens.size()), H = info.hidden_size;
        const std::string me = fmt::format("worker layers {}", range_name());
        check_work(w, me);
        const size_t k = w.batch.size();
        std::vector<std::shared_ptr<Session>> sess(k);
        for (size_t i = 0; i < k; ++i) sess[i] = session(w.batch[i].session_id);
        // Locked in session id order: other connections' batches lock some of them too.
        std::vector<size_t> order(k);
        for (size_t i = 0; i < k; ++i) order[i] = i;
        std::sort(order.begin(), order.end(),
                  [&](size_t a, size_t b) { return w.batch[a].session_id < w.batch[b].session_id; });
        std::vector<std::unique_lock<std::mutex>> locks;
        for (size_t i : order) locks.emplace_back(sess[i]->mu);
        dist::Telemetry tel{info.range.first, info.range.last, w.route_index, w.pos0, uint32_t(n), 0, 0, 0,
                            uint32_t(std::min<size_t>(w.input_hc.size(), UINT32_MAX)), 0};
        for (size_t i = 0; i < k; ++i)
            if (!match_prefix(*sess[i], w.batch[i].pos0, w.batch[i].prefix_hash, false)) return mismatch(w, tel);
        std::vector<model::BatchItem> items(k);
        size_t at = 0;
        for (size_t i = 0; i < k; ++i) {
            const dist::WorkItem& b = w.batch[i];
            model::Sequence& seq = *sess[i]->seq;
            if (seq.pos() + b.n_tokens > seq.options().ctx)
                fail("{}: context exceeded: {} tokens + {} new > the worker's context of {} (raise its --ctx)", me,
                     seq.pos(), b.n_tokens, seq.options().ctx);
            items[i] = {&seq, std::span<const int32_t>(w.tokens).subspan(at, b.n_tokens)};
            at += b.n_tokens;
        }
        std::vector<float> hidden(static_cast<size_t>(n * H));
        dist::decode_activations(w.input_hc, w.input_hc_bits, hidden);
        const auto t_eval = clock_type::now();
        model_->eval_layers(model::Batch(items), hidden.data());
        for (size_t i = 0; i < k; ++i) {
            sess[i]->hash = w.batch[i].result_hash;
            // The logits each item wants of the head (answer() gives them their buffers).
            const uint32_t f = w.batch[i].flags;
            if ((f & dist::kWorkOutputLogits) && !(w.flags & dist::kWorkAckOnly))
                items[i].want = (f & dist::kWorkAllLogits) ? model::Logits::All : model::Logits::Last;
        }
        tel.eval_usec = usec_since(t_eval);
        if (w.route_index + 1 < w.route.size()) {
            forward(w, hidden, tel, std::nullopt, up, down);
            return std::nullopt;
        }
        return answer(w, items, hidden, tel, std::nullopt);
    }

    // Sends the WORK on to the next hop with this hop's hidden state.
    void forward(const dist::Work& w, const std::vector<float>& hidden, dist::Telemetry tel,
                 std::optional<dist::DraftRows> draft, const std::shared_ptr<Upstream>& up,
                 std::unique_ptr<Downstream>& down) {
        const dist::RouteEntry& next = w.route[w.route_index + 1];
        dist::Work f = w;
        f.route_index = w.route_index + 1;
        f.layer_start = next.layer_start;
        f.layer_end = next.layer_end;
        f.input_hc = dist::encode_activations(hidden, w.input_hc_bits);
        if (upstream_dialect(w))  // upstream's OUTPUT_LOGITS: the next hop holds the head
            f.flags = (w.flags & ~dist::kWorkOutputLogits) |
                      (next.flags & dist::kRouteOutputLogits ? dist::kWorkOutputLogits : 0);
        const std::string where = fmt::format("{}:{}", next.host, next.port);
        tel.output_bytes = uint32_t(std::min<size_t>(f.input_hc.size(), UINT32_MAX));
        try {
            if (down && (down->where() != where || down->dead())) down.reset();
            if (!down) {
                dist::Socket s = dist::connect_to(next.host, uint16_t(next.port));
                dist::authenticate_connector(s, key_, dist::Channel::data);
                down = std::make_unique<Downstream>(std::move(s), where, up);
            }
            down->forward(f, tel, std::move(draft));
        } catch (const Error& e) {
            down.reset();
            fail("route incomplete: the next hop {} (layers {}:{}) failed: {}", where, next.layer_start,
                 next.layer_end, e.what());
        }
    }

    // The last hop's RESULT: an ACK, the logits, or the last hidden state for the coordinator's
    // head; with the draft rows asked for (the final hidden state of the rows and this hop's
    // captures).
    // `items`: the WORK's sessions and rows, each with the logits it wants (the logits follow
    // one another in the payload, in item order).
    std::vector<uint8_t> answer(const dist::Work& w, std::span<model::BatchItem> items, const std::vector<float>& hidden,
                                dist::Telemetry tel, std::optional<dist::DraftRows> draft) {
        const int64_t n = int64_t(w.tokens.size()), H = model_->info().hidden_size, V = model_->info().n_vocab;
        const bool ack_only = w.flags & dist::kWorkAckOnly;
        const bool want_logits = (w.flags & dist::kWorkOutputLogits) && !ack_only;
        dist::Result r;
        r.request_id = w.request_id;
        r.result_hash = w.result_hash;
        if (ack_only) {
            r.kind = dist::ResultKind::ack;
        } else if (want_logits) {
            int64_t rows = 0;
            for (const model::BatchItem& it : items)
                rows += it.want == model::Logits::All ? int64_t(it.tokens.size()) : it.want == model::Logits::Last;
            std::vector<float> logits(static_cast<size_t>(rows * V));
            rows = 0;
            for (model::BatchItem& it : items) {
                it.logits = logits.data() + rows * V;
                rows += it.want == model::Logits::All ? int64_t(it.tokens.size()) : it.want == model::Logits::Last;
            }
            const auto t_head = clock_type::now();
            model_->head(model::Batch(items.data(), items.size()), hidden.data());
            tel.eval_usec += usec_since(t_head);
            r.kind = dist::ResultKind::logits;
            r.payload_bits = 32;
            r.payload.resize(logits.size() * 4);
            std::memcpy(r.payload.data(), logits.data(), r.payload.size());
        } else {
            r.kind = dist::ResultKind::hidden_state;
            r.payload_bits = w.input_hc_bits;
            r.payload = dist::encode_activations(hidden, w.input_hc_bits);
        }
        if (draft && w.draft->hidden) {
            const auto rows = std::span<const float>(hidden).subspan(size_t((n - draft->rows) * H));
            draft->hidden = dist::encode_activations(rows, w.input_hc_bits);
        }
        r.draft = std::move(draft);
        tel.output_bytes = uint32_t(std::min<size_t>(r.payload.size(), UINT32_MAX));
        r.telemetry = {tel};
        return dist::encode(r);
    }

    WorkerOptions opt_;
    dist::DistKey key_;
    std::unique_ptr<model::Model> model_;
    std::shared_ptr<void> attached_;  // WorkerOptions::on_open
    std::unique_ptr<dist::Listener> listener_;
    dist::HandshakeSlots handshakes_;
    std::string fatal_;
    std::mutex sessions_mu_;
    std::map<uint64_t, std::shared_ptr<Session>> sessions_;
    std::list<uint64_t> lru_;
};

}  // namespace

int run_worker(const WorkerOptions& o) {
    if (const std::string why = dist_options_error(o.dist); !why.empty()) fail("{}", why);
    apply_dist_options(o.dist);
    Worker w(o);
    return w.run();
}

}  // namespace ds4::pipeline
