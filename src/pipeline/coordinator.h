// The coordinator's registry of workers (docs/DISTRIBUTED.md, "Routes"): it listens for
// control connections, authenticates them, takes each worker's HELLO, refuses a worker of
// another model or a range that overlaps one already registered (an ERROR frame to the worker,
// a line here), and forms the route: the workers sorted by first layer, each starting where the
// previous one ended, from the coordinator's own last layer + 1 to the last layer. A worker
// whose control connection closes leaves the route ("route incomplete") until one registers
// again; each change bumps the route's generation.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dist/auth.h"
#include "dist/connection.h"
#include "dist/protocol.h"
#include "model/model.h"

namespace ds4::pipeline {

// What identifies a model between our own processes: the first four bytes of the metadata hash
// (equal for every range and split file of one model) as WORK's model_id, and the architecture.
// An older worker of ours sends these in its HELLO; ours now sends upstream's (below) and tells
// its own in an IDENTITY frame when the coordinator probes it (docs/DISTRIBUTED.md, "Mixed
// clusters").
uint32_t model_id(const model::ModelInfo& info);
std::string model_family(const model::ModelInfo& info);
// Upstream ds4's identity of a model (its HELLO and WORK): model_id is the variant number (0
// DeepSeek V4 Flash, 1 DeepSeek V4 Pro -- told apart by the embedding width --, 2 GLM 5.2) and
// the name that variant's display name.
uint32_t upstream_model_id(const model::ModelInfo& info);
std::string upstream_model_name(const model::ModelInfo& info);
// HELLO's quant_bits as upstream's coordinator requires it: 4 when the routed experts of the
// file's first layer in `range` that has them are Q4_K, else 2.
uint32_t routed_quant_bits(const gguf::File& file, const model::LayerRange& range);
dist::Identity identity(const model::ModelInfo& info);

// How a worker speaks: ours (negotiated by the IDENTIFY probe: our identity checks and WORK
// flags 0x10/0x40), an older one of ours (its HELLO carries our identity; no probe), or
// upstream's (only upstream's frames and flags).
enum class Dialect { ours, ours_legacy, upstream };

// One worker hop of a route.
struct Hop {
    dist::RouteEntry entry;  // host, data port, layer_start, layer_end (inclusive), flags
    bool has_output = false;
    uint32_t ctx_size = 0;
    Dialect dialect = Dialect::ours;
    uint32_t features = 0;  // the extensions its IDENTITY offered (dist::kFeature*)
};

struct Route {
    uint64_t generation = 0;
    std::vector<Hop> hops;          // in layer order; empty when the coordinator holds every layer
    bool worker_head = false;       // the last hop runs the output head
    bool upstream = false;          // a hop is upstream's: every WORK speaks upstream's dialect
    bool batched = false;           // every hop reads batched WORK (dist::kFeatureBatchedWork)
    std::vector<dist::RouteEntry> entries() const;
    std::string str() const;        // "127.0.0.1:4001 3:4 -> 127.0.0.1:4002 5:output"
};

class Coordinator {
public:
    // Listens on host:port for control connections (port 0: any free port). `local` is the
    // coordinator's own range (it must start at layer 0).
    Coordinator(const model::ModelInfo& local, const std::string& host, uint16_t port, dist::DistKey key,
                bool debug);
    ~Coordinator();
    Coordinator(const Coordinator&) = delete;
    Coordinator& operator=(const Coordinator&) = delete;

    uint16_t port() const { return listener_.port(); }
    // Waits until the registered workers cover every layer, printing what is missing every few
    // seconds; throws ds4::Error saying what is still missing after timeout_s.
    Route wait_for_route(double timeout_s);
    // The route now; throws ds4::Error ("route incomplete: ...") when layers are not covered.
    Route route() const;
    // Marks the route's generation stale (a data connection failed): the caller reconnects.
    uint64_t generation() const;

private:
    struct Worker {
        uint64_t id = 0;
        dist::Hello hello;
        Dialect dialect = Dialect::ours;
        uint32_t features = 0;
        std::string host;
        std::shared_ptr<dist::Socket> control;
    };

    void accept_loop();
    void serve_control(std::shared_ptr<dist::Socket> s);
    // Whose HELLO this is (probing it when it has upstream's shape), and the extensions a worker
    // of ours offers (`features`); throws ds4::Error with the reason when the worker runs
    // another model.
    Dialect identify(dist::Connection& c, const dist::Hello& h, uint32_t& features) const;
    // "" if the hello's layers may register (mu_ held), else why not.
    std::string refusal(const dist::Hello& h, const std::string& host) const;
    // The route, or why there is none (mu_ held).
    bool form_route(Route& r, std::string& missing) const;

    model::ModelInfo local_;
    dist::DistKey key_;
    bool debug_;
    dist::Listener listener_;
    mutable std::mutex mu_;
    std::condition_variable changed_;
    std::vector<Worker> workers_;
    uint64_t next_id_ = 1;
    uint64_t generation_ = 1;
    bool stopping_ = false;
    std::vector<std::shared_ptr<dist::Socket>> open_;  // control sockets, to wake on shutdown
    dist::HandshakeSlots handshakes_;                   // connections that have not sent HELLO yet
    std::vector<std::thread> threads_;
    std::vector<std::thread::id> finished_;             // threads_ that are done (joined on the next accept)
    std::thread acceptor_;
};

}  // namespace ds4::pipeline
