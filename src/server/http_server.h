// ds4-server's HTTP front end (spec/PRODUCT.md §4.1, §4.2, §4.10): routes, the request policy
// (Host / Origin, API key, media type, CORS), error shapes, and the hand-off of each
// generation request to the Scheduler. The sockets, deadlines and connection caps are
// HttpListener's (server/http_listener.h). Handler threads parse, render and tokenize (in
// parallel), then wait on their job's Channel, watching the client: a client that leaves, or a
// request over --request-timeout, cancels its job. Only the scheduler's worker touches the
// engine.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "chat/format.h"
#include "model/model.h"
#include "server/forced_output.h"
#include "server/host_policy.h"
#include "server/http_listener.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/response_store.h"
#include "server/scheduler.h"
#include "server/tool_memory.h"

namespace ds4::tokenizer {
class Tokenizer;
}

namespace ds4::server {

struct ServerOptions {
    std::string host = "127.0.0.1";
    int port = 8000;                      // 0: any free port (bind() returns it)
    std::string api_key;                  // empty: no check
    int64_t default_max_tokens = 393216;  // when the client gives no limit
    size_t max_body = size_t(64) << 20;   // request body limit in bytes
    int http_threads = 64;                // requests handled at once (beyond the cheap routes)
    int max_connections = 256;            // open connections in all
    int max_client_connections = 32;      // open connections per client address
    double header_timeout_s = 10;         // the request header must arrive within this
    double body_timeout_s = 60;           // the body within this after the header
    double request_timeout_s = 0;         // wall-clock limit of a generation request; 0: none
    bool cors = false;
    std::vector<std::string> allowed_hosts;  // Host names accepted besides localhost and the address
    std::string model_name;               // /v1/models "name"; empty: the loaded family's ("GLM 5.2", ...)
    SchedulerOptions scheduler;           // slots, prefill quantum, queue bound, session options
    int retry_after_s = 5;                // Retry-After of a 503 when the queue is full
    std::string trace_path;                  // --trace: JSON lines of every request and response
    double drain_timeout_s = 0;              // --drain-timeout: how long SIGTERM lets requests finish
    bool exact_tool_replay = true;           // off: --disable-exact-dsml-tool-replay
    size_t tool_memory_max_ids = 100000;     // --tool-memory-max-ids
    // --response-store N / --response-store-mb M: replies kept for previous_response_id and
    // live continuations (server/response_store.h); 0 entries: none.
    size_t response_store_max = ResponseStore::kDefaultMaxTurns;
    size_t response_store_bytes = ResponseStore::kDefaultMaxBytes;
};

class HttpServer {
public:
    // `forced` (may be null) is the test hook of forced_output.h. The chat format is the
    // model file's (chat::ChatFormat::from_gguf; throws ds4::Error when there is none).
    HttpServer(model::Model& model, const tokenizer::Tokenizer& tok, ServerOptions options,
               std::unique_ptr<ForcedOutputs> forced);
    ~HttpServer();

    // Binds the listening socket; returns the port. Throws ds4::Error when binding fails.
    int bind();
    // Serves until stop(); returns after the queue is drained and connections are closed.
    void run();
    // Graceful stop (callable from any thread, e.g. a signal watcher): new requests get 503,
    // queued and running generations end with "shutdown requested", their connections get
    // up to 5 s to send those last bytes, then the listener closes.
    void stop();
    // The drain before a stop (SIGTERM; docs/SERVER.md "Draining"): from now on /health and
    // /ready answer 503 "draining" and new generation requests 503 with Retry-After (a load
    // balancer sends them elsewhere), while the requests already accepted (queued or
    // running) go on. Returns when none is left, after `timeout_s`, or when `*cut` becomes
    // true, whichever is first; logs one line as it starts and one as it ends, and
    // /metrics shows ds4_draining 1. The caller then stop()s (which ends what is left).
    void drain(double timeout_s, const std::atomic<bool>* cut = nullptr);

    const Metrics& metrics() const { return metrics_; }
    // The exact-replay tool memory (null with --disable-exact-dsml-tool-replay).
    ToolMemory* tool_memory() { return tool_memory_.get(); }

private:
    std::optional<HttpResponse> on_headers(const HttpRequest& req);
    std::optional<HttpResponse> on_request(const HttpRequest& req);
    void on_thread(const HttpRequest& req, HttpExchange& ex);
    void generate(Api api, const HttpRequest& req, HttpExchange& ex);
    std::optional<HttpResponse> prepare(Api api, const HttpRequest& req, Job& job);
    void count_tokens(const HttpRequest& req, HttpExchange& ex);
    void restore_tool_blocks(const Request& r);
    // 400 for a prompt of n tokens that does not fit the context, in the API's error shape.
    HttpResponse prompt_too_long(Api api, const std::string& path, int64_t n, int64_t ctx);
    HttpResponse error(const std::string& path, int status, const std::string& message,
                       const std::string& param = {}, const std::string& code = {});
    HttpResponse json(std::string body, int status = 200) const;
    chat::RenderOptions render_options(chat::ThinkingMode mode, const Request& r) const;
    std::string model_json(const std::string& id) const;

    std::unique_ptr<chat::ChatFormat> format_;  // the model's (general.architecture); before scheduler_
    std::string architecture_;                  // the model's general.architecture (/v1/models)
    ServerOptions options_;
    int64_t ctx_;
    HostPolicy hosts_;
    std::unique_ptr<Trace> trace_;
    std::unique_ptr<ForcedOutputs> forced_;
    std::unique_ptr<ToolMemory> tool_memory_;  // null: exact tool replay is off
    std::unique_ptr<ResponseStore> responses_;  // null: --response-store 0
    Metrics metrics_;
    Scheduler scheduler_;
    std::unique_ptr<HttpListener> listener_;
    std::atomic<bool> stopping_{false};
    std::atomic<bool> draining_{false};
    std::atomic<uint64_t> seq_{0};
};

}  // namespace ds4::server
