// TCP for the pipeline (docs/DISTRIBUTED.md, "Connections"): a socket that sends and receives
// whole byte blocks, a listener, a connect that retries while the peer is not up yet, and a
// Connection that sends and receives whole frames through the codec (dist/protocol.h).
//
// Sockets get TCP_NODELAY (one frame is one request; no Nagle delay), SO_KEEPALIVE and a send
// timeout (a peer that stops reading fails the send instead of hanging it): the peer timeout T
// (--dist-timeout, default 60 s) unless DS4_DIST_SOCKET_TIMEOUT_SEC says otherwise. No receive
// timeout unless DS4_DIST_SOCKET_RECV_TIMEOUT_SEC is set (an idle connection may stay idle).
// With T the kernel also gives up on a peer whose host is gone: keepalive probes start after
// T/3 of silence and TCP_USER_TIMEOUT aborts a connection whose probes or data stay
// unacknowledged for T, so even an idle connection to a vanished host fails within about T; a
// connect waits at most handshake_timeout(). A live but stopped peer still ACKs: callers that
// await an answer use recv(silence_s) for that (docs/DISTRIBUTED.md, "Timeouts"). A frame that
// does not parse ends the connection after an ERROR frame naming the problem; nothing is
// allocated before its size is checked.
#pragma once

#include <cstddef>
#include <cstdint>
#include <atomic>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "common/error.h"
#include "dist/protocol.h"

namespace ds4::dist {

// The peer went away or the socket failed: the connection is unusable.
class TransportError : public Error {
public:
    using Error::Error;
};

// The peer stayed silent past a deadline (a TransportError: the connection is given up).
class TimeoutError : public TransportError {
public:
    using TransportError::TransportError;
};

// The peer timeout T in seconds (--dist-timeout; 0: none), process-wide: set it before any
// socket is made. It tunes keepalive and TCP_USER_TIMEOUT on every later socket (above) and
// bounds the handshake.
inline constexpr double kDefaultPeerTimeoutSeconds = 60;
void set_peer_timeout(double seconds);
double peer_timeout();
// How long an accepted connection may take to authenticate (or, without a key, to start its
// first frame), and a connect to complete: min(T, 10 s), 10 s when T is 0.
double handshake_timeout();

// Connections accepted on one listening port that have not finished their handshake (for a
// coordinator's control port: not sent HELLO yet). At most `limit` at a time, so silent
// connections hold a bounded number of threads; more are closed at once.
inline constexpr int kMaxPendingHandshakes = 16;
class HandshakeSlots {
public:
    explicit HandshakeSlots(int limit = kMaxPendingHandshakes) : limit_(limit) {}
    // Takes a slot; false when all are taken (`first_refusal` is set the first time after a
    // slot was free, for one log line per burst).
    bool try_acquire(bool* first_refusal = nullptr);
    void release();
    int limit() const { return limit_; }
    int in_use() const { return used_.load(); }

private:
    const int limit_;
    std::atomic<int> used_{0};
    std::atomic<bool> refusing_{false};
};

// One TCP socket (move-only; closed on destruction).
class Socket {
public:
    Socket() = default;
    explicit Socket(int fd, std::string peer = {}) : fd_(fd), peer_(std::move(peer)) {}
    ~Socket() { close(); }
    Socket(Socket&& o) noexcept : fd_(o.fd_), peer_(std::move(o.peer_)) { o.fd_ = -1; }
    Socket& operator=(Socket&& o) noexcept;
    Socket(const Socket&) = delete;
    Socket& operator=(const Socket&) = delete;

    bool open() const { return fd_ >= 0; }
    int fd() const { return fd_; }
    // "host:port" of the other side, for messages.
    const std::string& peer() const { return peer_; }
    // The other side's numeric address (no port).
    std::string peer_host() const;

    // All of `bytes`, or TransportError.
    void send_all(std::span<const uint8_t> bytes);
    // Exactly bytes.size() bytes, or TransportError (naming `what` when the peer closed).
    void recv_exact(std::span<uint8_t> bytes, const char* what);
    // Up to bytes.size() bytes, at least one; TransportError on the end of the stream.
    size_t recv_some(std::span<uint8_t> bytes);
    // The first bytes.size() bytes without consuming them (waits for all of them).
    void peek(std::span<uint8_t> bytes, const char* what);
    // Waits until bytes (or the end of the stream) can be read: false after `seconds` (<= 0:
    // waits without a limit).
    bool wait_readable(double seconds);
    // Receive timeout in seconds (0: none).
    void set_recv_timeout(double seconds);
    // Wakes a thread blocked on this socket (its call fails) without closing the descriptor.
    void shutdown();
    void close();

private:
    int fd_ = -1;
    std::string peer_;
};

// A listening TCP socket. host is a numeric address or a name ("0.0.0.0", "127.0.0.1", "::");
// port 0 picks a free one (port() tells which).
class Listener {
public:
    Listener(const std::string& host, uint16_t port);
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    uint16_t port() const { return port_; }
    // The next connection, with the socket options set; TransportError once shutdown() ran.
    Socket accept();
    // Makes a blocked accept() return (with TransportError); later accepts fail too.
    void shutdown();

private:
    int fd_ = -1;
    uint16_t port_ = 0;
};

// Whether `host` names a loopback address only (127.0.0.0/8, ::1, "localhost").
bool is_loopback(const std::string& host);

// Connects to host:port, retrying `attempts` times `delay_ms` apart while the connection is
// refused or the host unreachable (a peer that is still starting); other errors fail at once.
// Throws TransportError naming the address and the last error.
inline constexpr int kConnectAttempts = 200;
inline constexpr int kConnectDelayMs = 25;
Socket connect_to(const std::string& host, uint16_t port, int attempts = kConnectAttempts,
                  int delay_ms = kConnectDelayMs);

// Whole frames over a socket. One thread may send while another receives; the descriptor is
// closed only by close() or the destructor (a failed connection is shut down, not closed, so a
// thread still using it fails instead of touching a reused descriptor).
class Connection {
public:
    explicit Connection(Socket s, uint32_t max_payload = kDefaultMaxPayload)
        : sock_(std::move(s)), reader_(max_payload) {}

    Socket& socket() { return sock_; }
    const std::string& peer() const { return sock_.peer(); }
    bool open() const { return sock_.open() && !failed_; }

    // One encoded frame (encode(...) output); frames sent from several threads do not mix.
    void send(std::span<const uint8_t> frame) {
        std::lock_guard lk(send_mu_);
        sock_.send_all(frame);
    }
    // The next whole frame. TransportError when the peer closed or the socket failed;
    // ProtocolError when the bytes are not a valid frame: then an ERROR frame saying why is sent
    // (best effort) and the socket is closed. With `silence_s` > 0, TimeoutError (and the
    // connection is shut down) when no byte arrives for that long while a frame is awaited;
    // without it the wait for a frame's first byte has no limit, but once a frame has begun a
    // silence longer than peer_timeout() fails the same way.
    Frame recv(double silence_s = 0);
    // recv() and decode(); a frame whose record does not decode is handled like a bad frame.
    Message recv_message(double silence_s = 0);
    // Sends ERROR(message) (best effort) and shuts the connection down.
    void fail_and_close(const std::string& message);

    void shutdown() { sock_.shutdown(); }
    void close() { sock_.close(); }

private:
    Socket sock_;
    FrameReader reader_;
    std::deque<Frame> ready_;
    std::atomic<bool> failed_{false};
    std::mutex send_mu_;
};

// Environment overrides (spec §7.1): the send timeout (default: peer_timeout()), an optional
// receive timeout, and the socket buffer size in MiB (DS4_DIST_SOCKET_BUFFER_MB, default 128;
// 0 leaves the system's).
// check_environment() reads all three and throws ds4::Error naming a bad value: call it before
// any socket is made (the sockets' own calls would then fail in a background thread).
void check_environment();
double socket_buffer_mb();
double send_timeout_seconds();
double recv_timeout_seconds();

}  // namespace ds4::dist
