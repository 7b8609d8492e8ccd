// ds4-server's HTTP front end (PRODUCT.md §4.1, §4.2, §4.10) on cpp-httplib: routes, API key,
// CORS, error shapes, and the hand-off of each generation request to the Scheduler. Request
// threads parse, render and tokenize (in parallel), then wait on their job's Channel; only the
// scheduler's worker touches the engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "engine/engine.h"
#include "server/forced_output.h"
#include "server/metrics.h"
#include "server/scheduler.h"

namespace httplib {
class Server;
}

namespace ds4::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;                      // 0: any free port (bind() returns it)
    std::string api_key;                  // empty: no check
    int64_t default_max_tokens = 393216;  // when the client gives no limit
    size_t max_body = size_t(64) << 20;   // request body limit in bytes
    int http_threads = 64;                // connections served at once
    bool cors = false;
    std::string model_name = "DeepSeek V4 Flash";
};

class HttpServer {
public:
    // `forced` (may be null) is the test hook of forced_output.h.
    HttpServer(engine::Engine& engine, ServerOptions options, std::unique_ptr<ForcedOutputs> forced);
    ~HttpServer();

    // Binds the listening socket; returns the port. Throws ds4::Error when binding fails.
    int bind();
    // Serves until stop(); returns after the queue is drained and connections are closed.
    void run();
    // Graceful stop (callable from any thread, e.g. a signal watcher): new requests get 503,
    // queued and running generations end with "shutdown requested", then the listener closes.
    void stop();

    const Metrics& metrics() const { return metrics_; }

private:
    void routes();

    engine::Engine& engine_;
    ServerOptions options_;
    std::unique_ptr<ForcedOutputs> forced_;
    Metrics metrics_;
    Scheduler scheduler_;
    std::unique_ptr<httplib::Server> http_;
    std::atomic<bool> stopping_{false};
    std::atomic<int> open_streams_{0};  // streamed responses whose last bytes are not yet sent
    std::atomic<uint64_t> seq_{0};
};

}  // namespace ds4::server
