#include "pipeline/coordinator.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>

#include "common/error.h"
#include "common/log.h"

namespace ds4::pipeline {

uint32_t model_id(const model::ModelInfo& info) {
    const auto& h = info.metadata_hash;
    return uint32_t(h[0]) << 24 | uint32_t(h[1]) << 16 | uint32_t(h[2]) << 8 | uint32_t(h[3]);
}

std::string model_family(const model::ModelInfo& info) {
    return info.architecture.substr(0, dist::kMaxModelNameBytes);
}

uint32_t upstream_model_id(const model::ModelInfo& info) {
    if (info.architecture == "glm-dsa") return 2;
    return info.hidden_size == 4 * 7168 ? 1 : 0;  // Pro's embedding is 7168 wide (4 HC streams)
}

std::string upstream_model_name(const model::ModelInfo& info) {
    switch (upstream_model_id(info)) {
        case 1: return "DeepSeek V4 Pro";
        case 2: return "GLM 5.2";
        default: return "DeepSeek V4 Flash";
    }
}

uint32_t routed_quant_bits(const gguf::File& file, const model::LayerRange& range) {
    for (uint32_t l = range.first; l <= range.last; ++l)
        if (const auto* t = file.find_tensor(fmt::format("blk.{}.ffn_gate_exps.weight", l)))
            return t->type == TensorType::Q4_K ? 4 : 2;
    return 2;
}

dist::Identity identity(const model::ModelInfo& info) {
    return dist::Identity{info.n_layer, info.metadata_hash, model_family(info)};
}

namespace {

std::string range_str(uint32_t a, uint32_t b, bool output) {
    return output ? fmt::format("{}:output", a) : fmt::format("{}:{}", a, b);
}

}  // namespace

std::vector<dist::RouteEntry> Route::entries() const {
    std::vector<dist::RouteEntry> out;
    for (const Hop& h : hops) out.push_back(h.entry);
    return out;
}

std::string Route::str() const {
    std::string s;
    for (const Hop& h : hops) {
        if (!s.empty()) s += " -> ";
        s += fmt::format("{}:{} layers {}", h.entry.host, h.entry.port,
                         range_str(h.entry.layer_start, h.entry.layer_end, h.has_output));
    }
    return s.empty() ? "(no workers)" : s;
}

Coordinator::Coordinator(const model::ModelInfo& local, const std::string& host, uint16_t port, dist::DistKey key,
                         bool debug)
    : local_(local), key_(std::move(key)), debug_(debug), listener_(host, port) {
    if (local_.range.first != 0)
        fail("--role coordinator holds layers {}; the coordinator's range must start at layer 0 (0:K)",
             local_.range.str());
    if (!key_.enabled() && !dist::is_loopback(host))
        log::warn("ds4: warning: listening on {} without --dist-key: anyone who can reach port {} can "
                  "register as a worker and see the hidden states", host, unsigned(listener_.port()));
    log::info("ds4: coordinator listening on {}:{} for workers (layers {} here)", host,
              unsigned(listener_.port()), local_.range.str());
    acceptor_ = std::thread([this] { accept_loop(); });
}

Coordinator::~Coordinator() {
    {
        std::lock_guard lk(mu_);
        stopping_ = true;
        for (auto& s : open_) s->shutdown();
    }
    listener_.shutdown();
    if (acceptor_.joinable()) acceptor_.join();
    std::vector<std::thread> threads;
    {
        std::lock_guard lk(mu_);
        threads.swap(threads_);
    }
    for (auto& t : threads)
        if (t.joinable()) t.join();
}

void Coordinator::accept_loop() {
    for (;;) {
        dist::Socket s;
        try {
            s = listener_.accept();
        } catch (const dist::TransportError&) {
            return;  // shut down
        }
        // At most kMaxPendingHandshakes connections may be in their handshake (before HELLO);
        // more are closed at once, so silent connections hold a bounded number of threads.
        bool first_refusal = false;
        if (!handshakes_.try_acquire(&first_refusal)) {
            if (first_refusal)
                log::warn("ds4: closing new control connections ({} first): {} are still in their handshake",
                          s.peer(), handshakes_.limit());
            continue;
        }
        auto sp = std::make_shared<dist::Socket>(std::move(s));
        std::lock_guard lk(mu_);
        if (stopping_) return;
        // Threads of connections that ended are joined here, so they do not pile up.
        std::erase_if(threads_, [&](std::thread& t) {
            if (std::find(finished_.begin(), finished_.end(), t.get_id()) == finished_.end()) return false;
            t.join();  // it only returns now (it left its last lock of mu_)
            return true;
        });
        finished_.clear();
        open_.push_back(sp);
        threads_.emplace_back([this, sp] { serve_control(sp); });
    }
}

namespace {

[[noreturn]] void another_model(const std::string& name, uint32_t layers, uint32_t id, const std::string& ours,
                                uint32_t our_layers, uint32_t our_id) {
    fail("the worker runs another model ({} with {} layers, model id {:08x}) than the coordinator ({} with {} "
         "layers, model id {:08x})", name, layers, id, ours, our_layers, our_id);
}

}  // namespace

Dialect Coordinator::identify(dist::Connection& c, const dist::Hello& h, uint32_t& features) const {
    const uint32_t n = local_.n_layer;
    if (h.model_name == model_family(local_)) {  // an older worker of ours: our identity in its HELLO
        if (h.model_id != model_id(local_) || h.n_layers != n)
            another_model(h.model_name, h.n_layers, h.model_id, model_family(local_), n, model_id(local_));
        return Dialect::ours_legacy;
    }
    if (h.model_name != upstream_model_name(local_) || h.model_id != upstream_model_id(local_) || h.n_layers != n)
        another_model(h.model_name, h.n_layers, h.model_id, upstream_model_name(local_), n,
                      upstream_model_id(local_));
    // Upstream's HELLO shape: ours answers the probe with its identity, upstream refuses the flag.
    dist::Work probe;
    probe.model_id = upstream_model_id(local_);
    probe.flags = dist::kWorkIdentify;
    probe.pos0 = dist::kIdentityVersion2;  // we read IDENTITY version 2 (its features)
    probe.tokens = {0};
    probe.result_hash = dist::token_hash(probe.prefix_hash, probe.tokens);
    c.send(dist::encode(probe));
    const dist::Message m = c.recv_message(dist::handshake_timeout());
    if (const auto* id = std::get_if<dist::Identity>(&m)) {
        if (id->architecture != model_family(local_) || id->metadata_hash != local_.metadata_hash ||
            id->n_layers != n) {
            const dist::Identity w = *id;
            model::ModelInfo wi;
            wi.metadata_hash = w.metadata_hash;
            another_model(w.architecture, w.n_layers, model_id(wi), model_family(local_), n, model_id(local_));
        }
        features = id->features;
        return Dialect::ours;
    }
    const auto* r = std::get_if<dist::Result>(&m);
    if ((r && r->status != dist::kStatusOk) || std::holds_alternative<dist::ErrorFrame>(m)) return Dialect::upstream;
    fail("the worker answered the identity probe with an unexpected frame");
}

std::string Coordinator::refusal(const dist::Hello& h, const std::string& host) const {
    const uint32_t n = local_.n_layer;
    if (h.layer_start > h.layer_end || h.layer_end >= n)
        return fmt::format("the worker's layers {}:{} are not within the model's 0:{}", h.layer_start, h.layer_end,
                           n - 1);
    if (h.has_output && h.layer_end != n - 1)
        return fmt::format("the worker claims the output head but ends at layer {}", h.layer_end);
    if (h.layer_start <= local_.range.last)
        return fmt::format("the worker's layers {} overlap the coordinator's {}",
                           range_str(h.layer_start, h.layer_end, h.has_output), local_.range.str());
    if (h.listen_port == 0) return "the worker announced data port 0";
    for (const Worker& w : workers_) {
        const auto& o = w.hello;
        const bool same = w.host == host && o.layer_start == h.layer_start && o.layer_end == h.layer_end &&
                          o.has_output == h.has_output;
        if (same) continue;  // a re-registration replaces the stale entry
        if (h.layer_start <= o.layer_end && o.layer_start <= h.layer_end)
            return fmt::format("the worker's layers {} overlap layers {} of the worker at {}:{}",
                               range_str(h.layer_start, h.layer_end, h.has_output),
                               range_str(o.layer_start, o.layer_end, o.has_output), w.host, o.listen_port);
    }
    return "";
}

void Coordinator::serve_control(std::shared_ptr<dist::Socket> sp) {
    const std::string peer = sp->peer();
    uint64_t id = 0;
    bool pending = true;  // holds a handshake slot until HELLO is in
    const auto handshake_done = [&] {
        if (pending) handshakes_.release();
        pending = false;
    };
    try {
        // A worker authenticates and sends HELLO at once: a connection that stays silent is
        // dropped after the handshake timeout instead of holding a thread.
        sp->set_recv_timeout(dist::handshake_timeout());
        dist::authenticate_acceptor(*sp, key_, dist::Channel::control);
        sp->set_recv_timeout(dist::handshake_timeout());  // for HELLO too
        // The Connection owns the descriptor from here; `sp` stays as a handle to wake it.
        dist::Connection c(dist::Socket(dup(sp->fd()), peer));
        const dist::Message m = c.recv_message();
        const auto* h = std::get_if<dist::Hello>(&m);
        if (!h) {
            c.fail_and_close("expected HELLO on the control connection");
            fail("{} sent no HELLO on the control connection", peer);
        }
        Dialect dialect = Dialect::ours;
        uint32_t features = 0;
        try {
            dialect = identify(c, *h, features);
        } catch (const dist::TransportError&) {
            throw;
        } catch (const Error& e) {
            c.fail_and_close(std::string("the coordinator refused the registration: ") + e.what());
            fail("refused the worker at {}: {}", peer, e.what());
        }
        c.socket().set_recv_timeout(dist::recv_timeout_seconds());
        handshake_done();
        const std::string host = sp->peer_host();
        {
            std::lock_guard lk(mu_);
            const std::string why = refusal(*h, host);
            if (!why.empty()) {
                c.fail_and_close("the coordinator refused the registration: " + why);
                fail("refused the worker at {}: {}", peer, why);
            }
            std::erase_if(workers_, [&](const Worker& w) {
                const bool stale = w.host == host && w.hello.layer_start == h->layer_start &&
                                   w.hello.layer_end == h->layer_end && w.hello.has_output == h->has_output;
                if (stale) w.control->shutdown();
                return stale;
            });
            id = next_id_++;
            workers_.push_back({id, *h, dialect, features, host, sp});
            ++generation_;
            log::info("ds4: worker {}:{} registered layers {}{}", host, h->listen_port,
                      range_str(h->layer_start, h->layer_end, h->has_output),
                      dialect == Dialect::upstream ? fmt::format(" (upstream ds4, Q{} experts: its dialect on "
                                                                 "this route)", h->quant_bits)
                      : dialect == Dialect::ours_legacy ? " (an older ds4 of ours)" : "");
        }
        changed_.notify_all();
        // The connection stays open while the worker is up; its end is the worker's end.
        for (;;) (void)c.recv();
    } catch (const dist::AuthError& e) {
        log::warn("ds4: control connection: {}", e.what());
    } catch (const Error& e) {
        if (id == 0) log::warn("ds4: control connection from {}: {}", peer, e.what());
    }
    handshake_done();
    std::lock_guard lk(mu_);
    finished_.push_back(std::this_thread::get_id());
    if (id != 0) {
        const auto it = std::find_if(workers_.begin(), workers_.end(), [&](const Worker& w) { return w.id == id; });
        if (it != workers_.end()) {
            if (!stopping_)
                log::warn("ds4: worker {}:{} (layers {}) dropped; the route is incomplete until it "
                          "registers again", it->host, it->hello.listen_port,
                          range_str(it->hello.layer_start, it->hello.layer_end, it->hello.has_output));
            workers_.erase(it);
            ++generation_;
        }
    }
    std::erase(open_, sp);
    sp->close();
    changed_.notify_all();
}

bool Coordinator::form_route(Route& r, std::string& missing) const {
    r = Route{};
    r.generation = generation_;
    const uint32_t n = local_.n_layer;
    if (local_.range.output) return true;  // the coordinator holds the whole model
    std::map<uint32_t, const Worker*> by_start;
    for (const Worker& w : workers_) by_start[w.hello.layer_start] = &w;
    uint32_t next = local_.range.last + 1;
    std::vector<std::string> gaps;
    while (next < n) {
        const auto it = by_start.find(next);
        if (it == by_start.end()) {
            // The gap runs to the next registered start (or the end).
            const auto after = by_start.upper_bound(next);
            const uint32_t end = after == by_start.end() ? n - 1 : after->first - 1;
            gaps.push_back(end == n - 1 ? fmt::format("{}:output", next) : fmt::format("{}:{}", next, end));
            if (after == by_start.end()) break;
            next = after->first;
            continue;
        }
        const Worker& w = *it->second;
        Hop hop;
        hop.entry.host = w.host;
        hop.entry.port = w.hello.listen_port;
        hop.entry.layer_start = w.hello.layer_start;
        hop.entry.layer_end = w.hello.layer_end;
        hop.has_output = w.hello.has_output;
        hop.ctx_size = w.hello.ctx_size;
        hop.dialect = w.dialect;
        hop.features = w.features;
        r.upstream = r.upstream || w.dialect == Dialect::upstream;
        r.hops.push_back(hop);
        next = w.hello.layer_end + 1;
    }
    if (!gaps.empty()) {
        missing = fmt::format("no worker holds layers {}", fmt::join(gaps, ", "));
        return false;
    }
    r.worker_head = !r.hops.empty() && r.hops.back().has_output;
    r.batched = !r.hops.empty() && std::all_of(r.hops.begin(), r.hops.end(), [](const Hop& h) {
        return h.dialect == Dialect::ours && (h.features & dist::kFeatureBatchedWork);
    });
    if (r.worker_head) r.hops.back().entry.flags = dist::kRouteOutputLogits;
    return true;
}

Route Coordinator::route() const {
    std::lock_guard lk(mu_);
    Route r;
    std::string missing;
    if (!form_route(r, missing)) fail("route incomplete: {}", missing);
    return r;
}

uint64_t Coordinator::generation() const {
    std::lock_guard lk(mu_);
    return generation_;
}

Route Coordinator::wait_for_route(double timeout_s) {
    using clock = std::chrono::steady_clock;
    const auto start = clock::now();
    const auto deadline =
        start + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(std::min(timeout_s, 1e9)));
    auto next_note = start;
    std::unique_lock lk(mu_);
    for (;;) {
        Route r;
        std::string missing;
        if (form_route(r, missing)) {
            log::info("ds4: route complete: coordinator layers {} -> {}{}", local_.range.str(), r.str(),
                      r.worker_head || local_.range.output ? "" : " (output head here)");
            return r;
        }
        const auto now = clock::now();
        if (now >= deadline)
            fail("route incomplete after {:.0f} s: {} (start the workers with --coordinator HOST {})", timeout_s,
                 missing, listener_.port());
        if (now >= next_note) {
            log::info("ds4: waiting for workers: {}", missing);
            next_note = now + std::chrono::seconds(5);
        }
        changed_.wait_until(lk, std::min(deadline, next_note));
    }
}

}  // namespace ds4::pipeline
