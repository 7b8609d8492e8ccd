#include "server/http_listener.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/error.h"

namespace ds4::server {
namespace {

using Clock = std::chrono::steady_clock;

const char* reason(int status) {
    switch (status) {
        case 100: return "Continue";
        case 200: return "OK";
        case 204: return "No Content";
        case 400: return "Bad Request";
        case 401: return "Unauthorized";
        case 403: return "Forbidden";
        case 404: return "Not Found";
        case 408: return "Request Timeout";
        case 411: return "Length Required";
        case 413: return "Content Too Large";
        case 415: return "Unsupported Media Type";
        case 431: return "Request Header Fields Too Large";
        case 500: return "Internal Server Error";
        case 503: return "Service Unavailable";
        case 504: return "Gateway Timeout";
        case 505: return "HTTP Version Not Supported";
        default: return "Status";
    }
}

Clock::time_point after(double seconds) {
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
}

int ms_until(Clock::time_point t) {
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t - Clock::now()).count();
    return ms <= 0 ? 0 : ms > 1000000 ? 1000000 : int(ms);
}

std::string peer_address(const sockaddr_storage& a) {
    char buf[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET)
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(a).sin_addr, buf, sizeof buf);
    else if (a.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(a).sin6_addr, buf, sizeof buf);
    return buf;
}

// Best effort, never blocks (the socket is non-blocking): for the interim 100 Continue.
void send_now(int fd, std::string_view bytes) {
    while (!bytes.empty()) {
        const ssize_t n = ::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n <= 0) return;
        bytes.remove_prefix(size_t(n));
    }
}

constexpr int kMaxRefusing = 64;           // over-cap connections being told 503 at once
constexpr double kDrainSeconds = 2;        // reading what a client still sends after our answer,
constexpr size_t kDrainBytes = 1 << 20;    // for this long or this much at most
constexpr size_t kRecvChunk = 256 * 1024;

}  // namespace

std::string serialize_response(const HttpResponse& r, bool chunked, bool head) {
    std::string out = fmt::format("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
    if (r.status != 204 && r.status != 100) {
        out += "Content-Type: " + r.content_type + "\r\n";
        out += chunked ? std::string("Transfer-Encoding: chunked\r\n")
                       : fmt::format("Content-Length: {}\r\n", r.body.size());
    }
    for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
    out += "Connection: close\r\n\r\n";
    if (!chunked && !head && r.status != 204) out += r.body;
    return out;
}

// ---------------------------------------------------------------- HttpExchange

bool HttpExchange::write_all(std::string_view bytes) {
    if (failed_) return false;
    auto deadline = after(write_timeout_s_);
    while (!bytes.empty()) {
        if (cut_->load()) return !(failed_ = true);
        const ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
        if (n > 0) {
            bytes.remove_prefix(size_t(n));
            deadline = after(write_timeout_s_);  // the client is reading: restart the clock
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            const int wait = ms_until(deadline);
            if (wait == 0) return !(failed_ = true);
            pollfd p{fd_, POLLOUT, 0};
            ::poll(&p, 1, std::min(wait, 200));
            continue;
        }
        return !(failed_ = true);
    }
    return true;
}

bool HttpExchange::send(const HttpResponse& response) {
    started_ = true;
    if (trace_) trace_->response(seq_, response.status, response.headers, response.body);
    return write_all(serialize_response(response));
}

bool HttpExchange::start_stream(const HttpResponse& head) {
    started_ = true;
    if (trace_) trace_->stream(seq_, head.status, head.headers);
    streaming_ = true;
    return write_all(serialize_response(head, true));
}

bool HttpExchange::write(std::string_view data) {
    if (data.empty()) return !failed_;
    if (trace_) trace_->events(seq_, data);
    std::string chunk = fmt::format("{:x}\r\n", data.size());
    chunk.append(data);
    chunk += "\r\n";
    return write_all(chunk);
}

bool HttpExchange::finish_stream() {
    const bool ok = write_all("0\r\n\r\n");
    if (trace_ && streaming_) trace_->end(seq_, ok);
    streaming_ = false;
    return ok;
}

HttpExchange::~HttpExchange() {
    if (trace_ && streaming_) trace_->end(seq_, false);
}

bool HttpExchange::client_gone() const {
    if (failed_ || cut_->load()) return true;
    pollfd p{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&p, 1, 0) <= 0) return false;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
    if (p.revents & POLLIN) {
        char c;
        const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT);
        return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR);
    }
    return false;
}

// ---------------------------------------------------------------- HttpListener

struct HttpListener::Conn {
    enum class Phase { Reading, Writing, Draining };
    int fd = -1;
    std::string peer;
    bool counted = true;  // counts toward the caps (a refused connection does not)
    Phase phase = Phase::Reading;
    Clock::time_point deadline;
    std::unique_ptr<HttpRequestReader> reader;
    bool headers_checked = false;
    std::string out;
    size_t out_pos = 0;
    size_t drained = 0;
};

HttpListener::HttpListener(ListenerOptions options, Handlers handlers)
    : options_(std::move(options)), handlers_(std::move(handlers)) {
    if (::pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) fail("cannot create a pipe: {}", std::strerror(errno));
}

HttpListener::~HttpListener() {
    stop(0);
    for (int fd : wake_)
        if (fd >= 0) ::close(fd);
}

int HttpListener::bind() {
    const std::string host = options_.host == "localhost" ? "127.0.0.1" : options_.host;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* list = nullptr;
    const std::string port = std::to_string(options_.port);
    if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &list); rc != 0)
        fail("cannot listen on {}:{}: {}", host, options_.port, ::gai_strerror(rc));
    int err = 0;
    for (addrinfo* ai = list; ai && listen_fd_ < 0; ai = ai->ai_next) {
        const int fd = ::socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) {
            err = errno;
            continue;
        }
        // SO_REUSEADDR only lets a restarted server reuse a port still in TIME_WAIT; without
        // SO_REUSEPORT, Linux refuses a second listener on the same address and port.
        const int yes = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
        if (::bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
            listen_fd_ = fd;
        } else {
            err = errno;
            ::close(fd);
        }
    }
    ::freeaddrinfo(list);
    if (listen_fd_ < 0) {
        if (err == EADDRINUSE) fail("cannot listen on {}:{}: port in use (is another server running there?)", host, options_.port);
        if (err == EADDRNOTAVAIL) fail("cannot listen on {}:{}: not an address of this machine", host, options_.port);
        fail("cannot listen on {}:{}: {}", host, options_.port, std::strerror(err));
    }
    sockaddr_storage a{};
    socklen_t len = sizeof a;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    return a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(a).sin6_port)
                                   : ntohs(reinterpret_cast<sockaddr_in&>(a).sin_port);
}

void HttpListener::run() {
    {
        std::lock_guard lock(mutex_);
        if (exit_ || listen_fd_ < 0) return;
        front_running_ = true;
    }
    loop();
    for (auto& c : conns_) close_conn(*c);
    conns_.clear();
    std::lock_guard lock(mutex_);
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
    front_running_ = false;
    cv_.notify_all();
}

void HttpListener::stop(double grace_s) {
    std::unique_lock lock(mutex_);
    if (stop_requested_) {
        cv_.wait(lock, [&] { return stopped_; });
        return;
    }
    stop_requested_ = true;
    // Handler threads finish what they are sending (the last events of a stream).
    cv_.wait_for(lock, std::chrono::duration<double>(grace_s), [&] { return handlers_running_ == 0; });
    // Then the rest are cut: their writes fail and their waits end.
    cut_ = true;
    for (int fd : handler_fds_) ::shutdown(fd, SHUT_RDWR);
    cv_.wait(lock, [&] { return handlers_running_ == 0; });
    exit_ = true;
    lock.unlock();
    const char b = 1;
    (void)!::write(wake_[1], &b, 1);
    lock.lock();
    cv_.wait(lock, [&] { return !front_running_; });
    if (listen_fd_ >= 0) ::close(listen_fd_);
    listen_fd_ = -1;
    stopped_ = true;
    cv_.notify_all();
}

void HttpListener::loop() {
    std::vector<pollfd> fds;
    auto pause_accept_until = Clock::time_point{};
    while (!exit_) {
        fds.clear();
        fds.push_back({wake_[0], POLLIN, 0});
        const bool accepting = Clock::now() >= pause_accept_until;
        fds.push_back({accepting ? listen_fd_ : -1, POLLIN, 0});
        auto next = Clock::now() + std::chrono::milliseconds(500);
        for (auto& c : conns_) {
            const short ev = c->phase == Conn::Phase::Writing ? POLLOUT : POLLIN;
            fds.push_back({c->fd, ev, 0});
            next = std::min(next, c->deadline);
        }
        if (!accepting) next = std::min(next, pause_accept_until);
        const int n = ::poll(fds.data(), nfds_t(fds.size()), ms_until(next) + 1);
        if (n < 0 && errno != EINTR) fail("poll failed: {}", std::strerror(errno));
        if (fds[0].revents) {
            char buf[64];
            while (::read(wake_[0], buf, sizeof buf) > 0) {
            }
        }
        if (exit_) break;
        if (fds[1].revents & POLLIN) {
            const size_t before = conns_.size();
            accept_all();
            if (conns_.size() == before && (errno == EMFILE || errno == ENFILE))
                pause_accept_until = Clock::now() + std::chrono::milliseconds(100);  // out of fds
        }
        const auto now = Clock::now();
        // fds[2 + i] belongs to conns_[i] for the connections that existed before accept_all.
        const size_t polled = fds.size() - 2;
        for (size_t i = 0; i < conns_.size(); ++i) {
            Conn& c = *conns_[i];
            const short re = i < polled ? fds[2 + i].revents : 0;
            if (c.fd < 0) continue;
            if (c.phase == Conn::Phase::Writing) {
                if (re & (POLLOUT | POLLERR | POLLHUP)) flush(c);
            } else if (re & (POLLIN | POLLERR | POLLHUP)) {
                on_readable(c);
            }
            if (c.fd >= 0 && now >= c.deadline) {
                if (c.phase == Conn::Phase::Reading) {
                    const bool header = !c.reader || c.reader->state() == HttpRequestReader::State::Headers;
                    const double t = header ? options_.header_timeout_s : options_.body_timeout_s;
                    respond(c, handlers_.error(c.reader ? c.reader->path_hint() : std::string(), 408,
                                               fmt::format("request {} not received within {} s", header ? "header" : "body", t)));
                } else {
                    close_conn(c);
                }
            }
        }
        std::erase_if(conns_, [](const std::unique_ptr<Conn>& c) { return c->fd < 0; });
    }
}

void HttpListener::accept_all() {
    for (int i = 0; i < 64; ++i) {
        sockaddr_storage a{};
        socklen_t len = sizeof a;
        const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;  // EAGAIN, or out of fds (errno tells the loop)
        const int yes = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);  // SSE tokens go out at once
        auto c = std::make_unique<Conn>();
        c->fd = fd;
        c->peer = peer_address(a);
        std::string refusal;
        {
            std::lock_guard lock(mutex_);
            if (open_ >= options_.max_connections)
                refusal = fmt::format("too many open connections (the limit is {}, --max-connections)",
                                      options_.max_connections);
            else if (per_client_[c->peer] >= options_.max_client_connections)
                refusal = fmt::format("too many open connections from {} (the limit is {}, --max-client-connections)",
                                      c->peer, options_.max_client_connections);
            if (refusal.empty()) {
                ++open_;
                ++per_client_[c->peer];
            } else if (per_client_[c->peer] == 0) {
                per_client_.erase(c->peer);
            }
        }
        if (!refusal.empty()) {
            c->counted = false;
            if (refusing_ >= kMaxRefusing) {  // a flood: no answer at all
                ::close(fd);
                continue;
            }
            ++refusing_;
            respond(*c, handlers_.error({}, 503, refusal));
        } else {
            c->reader = std::make_unique<HttpRequestReader>(options_.limits);
            c->deadline = after(options_.header_timeout_s);
        }
        if (c->fd >= 0) conns_.push_back(std::move(c));
    }
}

void HttpListener::on_readable(Conn& c) {
    static thread_local std::string buf(kRecvChunk, '\0');
    const ssize_t n = ::recv(c.fd, buf.data(), buf.size(), 0);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
    if (c.phase == Conn::Phase::Draining) {
        c.drained += size_t(std::max<ssize_t>(n, 0));
        if (n <= 0 || c.drained > kDrainBytes) close_conn(c);  // the client closed, or sends on regardless
        return;
    }
    if (n <= 0) {
        // The client went away (or half-closed) before its request was complete: nobody
        // is left to answer.
        close_conn(c);
        return;
    }
    c.reader->feed(std::string_view(buf.data(), size_t(n)));
    after_feed(c);
}

void HttpListener::after_feed(Conn& c) {
    using S = HttpRequestReader::State;
    HttpRequestReader& r = *c.reader;
    if (r.state() == S::Failed) return respond(c, handlers_.error(r.path_hint(), r.error_status(), r.error_message()));
    if (r.state() != S::Body && r.state() != S::Done) return;
    r.request().peer = c.peer;
    try {
        if (!c.headers_checked) {
            c.headers_checked = true;
            if (auto res = handlers_.on_headers(r.request())) return respond(c, *res);
            if (r.state() == S::Body) {
                c.deadline = after(options_.body_timeout_s);
                if (r.expects_continue()) send_now(c.fd, "HTTP/1.1 100 Continue\r\n\r\n");
            }
        }
        if (r.state() != S::Done) return;
        if (auto res = handlers_.on_request(r.request())) return respond(c, *res);
    } catch (const std::exception& e) {
        return respond(c, handlers_.error(r.request().path, 500, e.what()));
    }
    dispatch(c);
}

void HttpListener::respond(Conn& c, const HttpResponse& r) {
    const bool head = c.reader && c.reader->state() != HttpRequestReader::State::Headers &&
                      c.reader->request().method == "HEAD";
    if (options_.trace) {
        HttpRequest none;
        HttpRequest& req = c.reader ? c.reader->request() : none;
        if (req.path.empty() && c.reader) req.path = c.reader->path_hint();
        req.peer = c.peer;
        options_.trace->response(options_.trace->request(req), r.status, r.headers, head ? std::string_view() : r.body);
    }
    c.out = serialize_response(r, false, head);
    c.out_pos = 0;
    c.phase = Conn::Phase::Writing;
    c.deadline = after(options_.write_timeout_s);
    c.reader.reset();  // the request (and its buffers) are done with
    flush(c);
}

void HttpListener::flush(Conn& c) {
    while (c.out_pos < c.out.size()) {
        const ssize_t n = ::send(c.fd, c.out.data() + c.out_pos, c.out.size() - c.out_pos, MSG_NOSIGNAL);
        if (n > 0) {
            c.out_pos += size_t(n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        return close_conn(c);
    }
    // Answered: stop sending, and read (and drop) what the client still sends for a moment,
    // so that closing with unread bytes does not reset the connection under the answer.
    c.out.clear();
    c.out.shrink_to_fit();
    ::shutdown(c.fd, SHUT_WR);
    c.phase = Conn::Phase::Draining;
    c.deadline = after(kDrainSeconds);
}

void HttpListener::dispatch(Conn& c) {
    std::string refusal;
    {
        std::lock_guard lock(mutex_);
        if (cut_) {
            refusal = "server shutting down";
        } else if (handlers_running_ >= options_.max_handlers) {
            refusal = fmt::format("too many requests in progress (the limit is {}, --http-threads)",
                                  options_.max_handlers);
        } else {
            ++handlers_running_;
            handler_fds_.insert(c.fd);
        }
    }
    if (!refusal.empty()) return respond(c, handlers_.error(c.reader->request().path, 503, refusal));
    const int fd = c.fd;
    const std::string peer = c.peer;
    HttpRequest req = std::move(c.reader->request());
    c.fd = -1;  // the handler thread owns the socket now
    c.reader.reset();
    const uint64_t seq = options_.trace ? options_.trace->request(req) : 0;
    std::thread([this, fd, peer, seq, req = std::move(req)] {
        {
            HttpExchange ex(fd, options_.write_timeout_s, &cut_, options_.trace, seq);
            try {
                handlers_.on_thread(req, ex);
            } catch (const std::exception& e) {
                if (!ex.started()) ex.send(handlers_.error(req.path, 500, e.what()));
            }
        }
        handler_done(fd, peer);
    }).detach();
}

void HttpListener::handler_done(int fd, const std::string& peer) {
    ::shutdown(fd, SHUT_WR);
    std::lock_guard lock(mutex_);
    handler_fds_.erase(fd);
    ::close(fd);  // under the lock: stop() never shuts down a reused descriptor
    --open_;
    if (--per_client_[peer] <= 0) per_client_.erase(peer);
    --handlers_running_;
    cv_.notify_all();  // the last use of `this` by this thread
}

void HttpListener::close_conn(Conn& c) {
    if (c.fd < 0) return;
    ::close(c.fd);
    c.fd = -1;
    if (c.counted) release(c.peer);
    else --refusing_;
}

void HttpListener::release(const std::string& peer) {
    std::lock_guard lock(mutex_);
    --open_;
    if (--per_client_[peer] <= 0) per_client_.erase(peer);
}

}  // namespace ds4::server
