#include "dist/connection.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace ds4::dist {
namespace {

std::atomic<double> g_peer_timeout{kDefaultPeerTimeoutSeconds};

double env_number(const char* name, double dflt, const char* unit) {
    const char* v = std::getenv(name);
    if (!v || !*v) return dflt;
    char* end = nullptr;
    const double d = std::strtod(v, &end);
    if (end == v || *end || d < 0) fail("{}={} is not a number of {}", name, v, unit);
    return d;
}

void set_timeout(int fd, int opt, double seconds) {
    timeval tv{};
    tv.tv_sec = time_t(seconds);
    tv.tv_usec = suseconds_t((seconds - double(tv.tv_sec)) * 1e6);
    setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

std::string address_string(const sockaddr* sa, bool with_port) {
    char host[NI_MAXHOST] = "?", serv[NI_MAXSERV] = "?";
    const socklen_t len = sa->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
    getnameinfo(sa, len, host, sizeof host, serv, sizeof serv, NI_NUMERICHOST | NI_NUMERICSERV);
    if (!with_port) return host;
    return sa->sa_family == AF_INET6 ? fmt::format("[{}]:{}", host, serv) : fmt::format("{}:{}", host, serv);
}

// The options every pipeline socket gets (spec §7.1).
void configure(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    const double snd = send_timeout_seconds();
    if (snd > 0) set_timeout(fd, SO_SNDTIMEO, snd);
    const double rcv = recv_timeout_seconds();
    if (rcv > 0) set_timeout(fd, SO_RCVTIMEO, rcv);
    // A vanished host answers nothing: probe an idle connection after T/3 of silence, every
    // T/6, and abort once probes or data stay unacknowledged for T (TCP_USER_TIMEOUT governs
    // both). A live peer's kernel answers probes however long its process computes.
    if (const double t = peer_timeout(); t > 0) {
        const int idle = std::max(1, int(t / 3)), intvl = std::max(1, int(t / 6)), cnt = 6;
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
        setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
        const unsigned ms = unsigned(std::min(t * 1000, 2e9));
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof ms);
    }
    // Room for a whole prefill chunk's hidden state in flight (the kernel caps it at
    // net.core.wmem_max / rmem_max).
    const int buf = int(std::min<double>(socket_buffer_mb(), 2047) * 1024 * 1024);
    if (buf > 0) {
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    }
}

std::string sys_error(int err) { return std::strerror(err); }

// Waits up to `seconds` (<= 0: no limit) for fd to have `events`; false on timeout.
bool wait_for(int fd, short events, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    for (;;) {
        int ms = -1;
        if (seconds > 0) {
            const double left = std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
            if (left <= 0) return false;
            ms = int(std::min(left * 1000 + 1, 1e9));
        }
        pollfd p{fd, events, 0};
        const int rc = ::poll(&p, 1, ms);
        if (rc > 0) return true;  // ready, or an error / hang-up the next call reports
        if (rc < 0 && errno != EINTR) return true;
    }
}

// connect() that gives up after `seconds`: 0 when connected, else the errno; -1 on our timeout.
int connect_within(int fd, const sockaddr* a, socklen_t len, double seconds) {
    const int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int err = 0;
    if (::connect(fd, a, len) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            if (!wait_for(fd, POLLOUT, seconds)) {
                err = -1;
            } else {
                socklen_t l = sizeof err;
                if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
            }
        }
    }
    fcntl(fd, F_SETFL, flags);
    return err;
}

}  // namespace

void set_peer_timeout(double seconds) { g_peer_timeout = std::max(0.0, seconds); }
double peer_timeout() { return g_peer_timeout; }
double handshake_timeout() {
    const double t = peer_timeout();
    return t > 0 ? std::min(t, 10.0) : 10.0;
}

bool HandshakeSlots::try_acquire(bool* first_refusal) {
    int n = used_.load();
    while (n < limit_)
        if (used_.compare_exchange_weak(n, n + 1)) {
            refusing_ = false;
            return true;
        }
    const bool first = !refusing_.exchange(true);
    if (first_refusal) *first_refusal = first;
    return false;
}

void HandshakeSlots::release() { used_.fetch_sub(1); }

void check_environment() {
    socket_buffer_mb();
    send_timeout_seconds();
    recv_timeout_seconds();
}

double socket_buffer_mb() { return env_number("DS4_DIST_SOCKET_BUFFER_MB", 128, "MiB"); }
double send_timeout_seconds() { return env_number("DS4_DIST_SOCKET_TIMEOUT_SEC", peer_timeout(), "seconds"); }
double recv_timeout_seconds() { return env_number("DS4_DIST_SOCKET_RECV_TIMEOUT_SEC", 0, "seconds"); }

Socket& Socket::operator=(Socket&& o) noexcept {
    if (this != &o) {
        close();
        fd_ = o.fd_;
        peer_ = std::move(o.peer_);
        o.fd_ = -1;
    }
    return *this;
}

std::string Socket::peer_host() const {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (fd_ < 0 || getpeername(fd_, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return {};
    return address_string(reinterpret_cast<sockaddr*>(&ss), false);
}

void Socket::send_all(std::span<const uint8_t> bytes) {
    if (fd_ < 0) throw TransportError(fmt::format("connection to {} is closed", peer_));
    size_t off = 0;
    while (off < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            throw TransportError(fmt::format("sending to {} timed out (the peer stopped reading)", peer_));
        if (n <= 0) throw TransportError(fmt::format("sending to {} failed: {}", peer_, sys_error(errno)));
        off += size_t(n);
    }
}

size_t Socket::recv_some(std::span<uint8_t> bytes) {
    if (fd_ < 0) throw TransportError(fmt::format("connection to {} is closed", peer_));
    for (;;) {
        const ssize_t n = ::recv(fd_, bytes.data(), bytes.size(), 0);
        if (n > 0) return size_t(n);
        if (n == 0) throw TransportError(fmt::format("{} closed the connection", peer_));
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            throw TransportError(fmt::format("receiving from {} timed out", peer_));
        throw TransportError(fmt::format("receiving from {} failed: {}", peer_, sys_error(errno)));
    }
}

void Socket::recv_exact(std::span<uint8_t> bytes, const char* what) {
    size_t off = 0;
    while (off < bytes.size()) {
        try {
            off += recv_some(bytes.subspan(off));
        } catch (const TransportError& e) {
            throw TransportError(fmt::format("{} (reading {})", e.what(), what));
        }
    }
}

void Socket::peek(std::span<uint8_t> bytes, const char* what) {
    if (fd_ < 0) throw TransportError(fmt::format("connection to {} is closed", peer_));
    for (;;) {
        const ssize_t n = ::recv(fd_, bytes.data(), bytes.size(), MSG_PEEK | MSG_WAITALL);
        if (n == ssize_t(bytes.size())) return;
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            throw TransportError(fmt::format("receiving {} from {} timed out", what, peer_));
        if (n < 0) throw TransportError(fmt::format("receiving {} from {} failed: {}", what, peer_, sys_error(errno)));
        throw TransportError(fmt::format("{} closed the connection (reading {})", peer_, what));
    }
}

bool Socket::wait_readable(double seconds) {
    if (fd_ < 0) return true;  // the read reports the closed socket
    return wait_for(fd_, POLLIN, seconds);
}

void Socket::set_recv_timeout(double seconds) {
    if (fd_ >= 0) set_timeout(fd_, SO_RCVTIMEO, seconds);
}

void Socket::shutdown() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
}

Listener::Listener(const std::string& host, uint16_t port) {
    addrinfo hints{}, *res = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    const std::string service = std::to_string(port);
    if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0)
        fail("cannot listen on {}:{}: {}", host, port, gai_strerror(rc));
    std::string last = "no address";
    for (addrinfo* a = res; a; a = a->ai_next) {
        const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 64) == 0) {
            fd_ = fd;
            sockaddr_storage ss{};
            socklen_t len = sizeof ss;
            getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
            port_ = ss.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port)
                                             : ntohs(reinterpret_cast<sockaddr_in*>(&ss)->sin_port);
            break;
        }
        last = sys_error(errno);
        ::close(fd);
    }
    freeaddrinfo(res);
    if (fd_ < 0) fail("cannot listen on {}:{}: {}", host, port, last);
}

Listener::~Listener() {
    if (fd_ >= 0) ::close(fd_);
}

Socket Listener::accept() {
    for (;;) {
        sockaddr_storage ss{};
        socklen_t len = sizeof ss;
        const int fd = ::accept4(fd_, reinterpret_cast<sockaddr*>(&ss), &len, SOCK_CLOEXEC);
        if (fd >= 0) {
            configure(fd);
            return Socket(fd, address_string(reinterpret_cast<sockaddr*>(&ss), true));
        }
        if (errno == EINTR || errno == ECONNABORTED) continue;
        throw TransportError(fmt::format("accept on port {} failed: {}", port_, sys_error(errno)));
    }
}

void Listener::shutdown() {
    if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

bool is_loopback(const std::string& host) {
    if (host == "localhost" || host == "::1") return true;
    in_addr a{};
    if (inet_pton(AF_INET, host.c_str(), &a) == 1) return (ntohl(a.s_addr) >> 24) == 127;
    return false;
}

Socket connect_to(const std::string& host, uint16_t port, int attempts, int delay_ms) {
    const std::string where = fmt::format("{}:{}", host, port);
    std::string last = "no address";
    for (int attempt = 0; attempt < std::max(1, attempts); ++attempt) {
        if (attempt > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
        addrinfo hints{}, *res = nullptr;
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        const std::string service = std::to_string(port);
        if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &res); rc != 0) {
            last = gai_strerror(rc);
            if (rc == EAI_AGAIN) continue;
            break;
        }
        bool retry = false;
        for (addrinfo* a = res; a; a = a->ai_next) {
            const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
            if (fd < 0) {
                last = sys_error(errno);
                continue;
            }
            configure(fd);  // before connect: TCP_USER_TIMEOUT covers the SYN too
            const int err = connect_within(fd, a->ai_addr, a->ai_addrlen, handshake_timeout());
            if (err == 0) {
                freeaddrinfo(res);
                return Socket(fd, where);
            }
            // No answer at all (a vanished host): retrying only multiplies the wait.
            last = err < 0 ? fmt::format("no answer within {:g} s", handshake_timeout()) : sys_error(err);
            retry = retry || err == ECONNREFUSED || err == ENETUNREACH || err == EHOSTUNREACH ||
                    err == ETIMEDOUT || err == EINTR;
            ::close(fd);
        }
        freeaddrinfo(res);
        if (!retry) break;
    }
    throw TransportError(fmt::format("cannot connect to {}: {}", where, last));
}

Frame Connection::recv(double silence_s) {
    if (!ready_.empty()) {
        Frame f = std::move(ready_.front());
        ready_.pop_front();
        return f;
    }
    uint8_t buf[64 * 1024];
    while (ready_.empty()) {
        // Once a frame has begun the rest follows at once (a sender writes a frame in one go), so
        // a peer that stalls in the middle of one is given up after the peer timeout even where
        // the wait for the next frame has no limit (an idle connection).
        const bool mid_frame = reader_.pending() > 0;
        const double limit = silence_s > 0 ? silence_s : mid_frame ? peer_timeout() : 0;
        if (limit > 0 && !sock_.wait_readable(limit)) {
            failed_ = true;
            sock_.shutdown();
            if (silence_s > 0)
                throw TimeoutError(fmt::format("no answer from {} for {:g} s (--dist-timeout): the peer stopped or "
                                               "its host is unreachable", peer(), silence_s));
            throw TimeoutError(fmt::format("{} stopped sending in the middle of a frame for {:g} s (--dist-timeout)",
                                           peer(), limit));
        }
        const size_t n = sock_.recv_some(std::span<uint8_t>(buf, sizeof buf));
        try {
            for (Frame& f : reader_.feed(std::span<const uint8_t>(buf, n))) ready_.push_back(std::move(f));
        } catch (const ProtocolError& e) {
            fail_and_close(e.what());
            throw ProtocolError(fmt::format("{} sent a bad frame: {}", peer(), e.what()));
        }
    }
    Frame f = std::move(ready_.front());
    ready_.pop_front();
    return f;
}

Message Connection::recv_message(double silence_s) {
    const Frame f = recv(silence_s);
    try {
        return decode(f);
    } catch (const ProtocolError& e) {
        fail_and_close(e.what());
        throw ProtocolError(fmt::format("{} sent a bad {} frame: {}", peer(), frame_type_name(f.type), e.what()));
    }
}

void Connection::fail_and_close(const std::string& message) {
    try {
        std::lock_guard lk(send_mu_);
        if (sock_.open()) sock_.send_all(encode(ErrorFrame{message}));
    } catch (const Error&) {
        // The peer may be gone already; ending the connection is what matters.
    }
    failed_ = true;
    sock_.shutdown();
}

}  // namespace ds4::dist
