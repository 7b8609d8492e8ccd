// ds4-server's sockets (docs/SERVER.md "Limits"). One front thread accepts connections and
// reads every request with poll(), so a slow or idle client costs a buffer, never a thread:
// the header must arrive within header_timeout, the body within body_timeout after it, and
// each client address may hold at most max_client_connections open connections
// (max_connections in all; over a cap: 503 at once). A complete request goes first to
// on_request on the front thread, which answers the cheap routes (/health, /metrics, models)
// without ever waiting for a generation; anything else gets a thread of its own (at most
// max_handlers at once) and answers through an HttpExchange. Every response closes its
// connection. The listening socket is bound without SO_REUSEPORT: a second server on the
// same port fails with "port in use" instead of sharing the traffic.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http_reader.h"
#include "server/trace.h"

namespace ds4::server {

struct HttpResponse {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers;  // extra header fields
};

struct ListenerOptions {
    std::string host = "127.0.0.1";    // "localhost" binds 127.0.0.1
    int port = 8000;                   // 0: any free port
    HttpLimits limits;
    double header_timeout_s = 10;      // from accept to the end of the header section
    double body_timeout_s = 60;        // from the end of the header to the end of the body
    double write_timeout_s = 10;       // longest wait for the client to take more bytes
    int max_connections = 256;         // open connections, all clients together
    int max_client_connections = 32;   // open connections from one client address
    int max_handlers = 64;             // requests on handler threads at once
    Trace* trace = nullptr;            // --trace: every request and response (not owned)
};

// The connection a handler thread answers on. All calls return false once the client is
// gone, a write timed out, or the server stopped waiting (HttpListener::stop).
class HttpExchange {
public:
    // The whole response (Content-Length framing).
    bool send(const HttpResponse& response);
    // Status and header fields of a chunked response; write() sends each chunk.
    bool start_stream(const HttpResponse& head);
    bool write(std::string_view data);
    bool finish_stream();
    // Whether the client closed its end (half-closing counts) or the server is cutting
    // connections; cheap, never blocks.
    bool client_gone() const;
    bool started() const { return started_; }
    ~HttpExchange();  // traces a stream that never finished as cut
    HttpExchange(const HttpExchange&) = delete;
    HttpExchange& operator=(const HttpExchange&) = delete;

private:
    friend class HttpListener;
    HttpExchange(int fd, double write_timeout_s, const std::atomic<bool>* cut, Trace* trace, uint64_t seq)
        : fd_(fd), write_timeout_s_(write_timeout_s), cut_(cut), trace_(trace), seq_(seq) {}
    bool write_all(std::string_view bytes);

    int fd_;
    double write_timeout_s_;
    const std::atomic<bool>* cut_;
    Trace* trace_;
    uint64_t seq_;
    bool started_ = false;
    bool streaming_ = false;  // start_stream() and no finish_stream() yet
    bool failed_ = false;
};

// "HTTP/1.1 STATUS REASON" with the header fields and Connection: close; the body follows
// with Content-Length (chunked: Transfer-Encoding instead, body not included). `head`: the
// answer to a HEAD request, the same header fields (Content-Length of the body) and no body.
std::string serialize_response(const HttpResponse& r, bool chunked = false, bool head = false);

class HttpListener {
public:
    struct Handlers {
        // The header is complete, the body not yet read: a response here answers the request
        // without reading the body (policy checks: Host, API key, route, media type).
        std::function<std::optional<HttpResponse>(const HttpRequest&)> on_headers;
        // The request is complete, on the front thread: answers cheap routes (never blocks);
        // nullopt hands the request to on_thread.
        std::function<std::optional<HttpResponse>(const HttpRequest&)> on_request;
        std::function<void(const HttpRequest&, HttpExchange&)> on_thread;
        // The responses the listener makes itself (400, 408, 411, 413, 431, 503...), in the
        // error shape of the API that `path` belongs to ("" when unknown).
        std::function<HttpResponse(const std::string& path, int status, const std::string& message)> error;
    };

    HttpListener(ListenerOptions options, Handlers handlers);
    ~HttpListener();  // stop(0)
    HttpListener(const HttpListener&) = delete;
    HttpListener& operator=(const HttpListener&) = delete;

    // Binds and listens; returns the port. Throws ds4::Error ("port in use", ...).
    int bind();
    // The front loop, until stop().
    void run();
    // Stops taking requests: waits up to grace_s for handler threads to finish their
    // responses, then cuts the remaining connections, waits for every handler thread and
    // for run() to return. Idempotent; callable from any thread.
    void stop(double grace_s);

private:
    struct Conn;
    void loop();
    void accept_all();
    void on_readable(Conn& c);
    void after_feed(Conn& c);
    void respond(Conn& c, const HttpResponse& r);
    void flush(Conn& c);
    void dispatch(Conn& c);
    void close_conn(Conn& c);
    void release(const std::string& peer);
    void handler_done(int fd, const std::string& peer);

    ListenerOptions options_;
    Handlers handlers_;
    int listen_fd_ = -1;
    int wake_[2] = {-1, -1};
    std::vector<std::unique_ptr<Conn>> conns_;  // front thread only
    int refusing_ = 0;                          // front thread only

    std::mutex mutex_;
    std::condition_variable cv_;
    std::map<std::string, int> per_client_;  // open connections by client address
    int open_ = 0;                           // open connections in all
    int handlers_running_ = 0;
    std::set<int> handler_fds_;
    bool front_running_ = false;
    bool stop_requested_ = false;
    bool stopped_ = false;
    std::atomic<bool> exit_{false};
    std::atomic<bool> cut_{false};
};

}  // namespace ds4::server
