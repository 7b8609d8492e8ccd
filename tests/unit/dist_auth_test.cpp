// Pipeline connections (src/dist/connection.h) and their shared-secret handshake
// (src/dist/auth.h) over loopback TCP: keys are read and checked; the same key on both sides
// authenticates and frames flow; different keys, a key on one side only, a reflected proof and
// a proof for the other channel all fail with messages saying what happened, on both sides; a
// bad frame closes the connection after an ERROR frame; connects retry while nobody listens;
// a silent peer fails an awaited frame, a frame begun, and a handshake within the timeouts;
// handshake slots are bounded.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include "dist/auth.h"
#include "dist/connection.h"
#include "dist/protocol.h"

namespace {

using namespace ds4::dist;

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

DistKey key_of(const std::string& s) { return DistKey{std::vector<uint8_t>(s.begin(), s.end())}; }

const DistKey kKeyA = key_of("0123456789abcdef-secret-A");
const DistKey kKeyB = key_of("0123456789abcdef-secret-B");

std::string temp_file(const std::string& name, const std::string& bytes) {
    const auto p = std::filesystem::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
}

// Runs `acceptor` on the accepted socket in a thread and `connector` on a connected one; returns
// the messages of the AuthErrors they threw ("" if none).
struct Outcome {
    std::string connector, acceptor;
};
template <class C, class A>
Outcome handshake(C connector, A acceptor) {
    Listener l("127.0.0.1", 0);
    auto acc = std::async(std::launch::async, [&] {
        Socket s = l.accept();
        try {
            acceptor(s);
        } catch (const ds4::Error& e) {
            return std::string(e.what());
        }
        return std::string();
    });
    Outcome o;
    Socket c = connect_to("127.0.0.1", l.port());
    try {
        connector(c);
    } catch (const ds4::Error& e) {
        o.connector = e.what();
    }
    o.acceptor = acc.get();
    return o;
}

TEST(DistKeyFile, ReadsTheBytesWithoutTheTrailingNewline) {
    const auto p = temp_file("key", "0123456789abcdef\r\n");
    EXPECT_EQ(load_key(p).secret, key_of("0123456789abcdef").secret);
    std::filesystem::remove(p);
}

TEST(DistKeyFile, RefusesShortEmptyAndUnreadableKeys) {
    const auto shortk = temp_file("short", "tooshort\n"), empty = temp_file("empty", "");
    for (const auto& [path, want] : {std::pair{shortk, "needs at least 16"}, std::pair{empty, "is 0 bytes"},
                                     std::pair{std::string("/nonexistent/key"), "cannot read the file"}}) {
        try {
            load_key(path);
            ADD_FAILURE() << path;
        } catch (const ds4::Error& e) {
            EXPECT_TRUE(contains(e.what(), want)) << e.what();
            EXPECT_TRUE(contains(e.what(), "--dist-key")) << e.what();
        }
    }
    std::filesystem::remove(shortk);
    std::filesystem::remove(empty);
}

TEST(DistAuth, SameKeyAuthenticatesAndFramesFlow) {
    Listener l("127.0.0.1", 0);
    auto acc = std::async(std::launch::async, [&] {
        Connection c(l.accept());
        authenticate_acceptor(c.socket(), kKeyA, Channel::data);
        const Message m = c.recv_message();
        c.send(encode(ErrorFrame{"pong"}));
        return std::get<Hello>(m).model_name;
    });
    Connection c(connect_to("127.0.0.1", l.port()));
    authenticate_connector(c.socket(), kKeyA, Channel::data);
    Hello h;
    h.model_name = "ping";
    c.send(encode(h));
    EXPECT_EQ(std::get<ErrorFrame>(c.recv_message()).message, "pong");
    EXPECT_EQ(acc.get(), "ping");
}

TEST(DistAuth, DifferentKeysFailOnBothSides) {
    const auto o = handshake([](Socket& s) { authenticate_connector(s, kKeyA, Channel::control); },
                             [](Socket& s) { authenticate_acceptor(s, kKeyB, Channel::control); });
    EXPECT_TRUE(contains(o.connector, "the key files differ")) << o.connector;
    EXPECT_TRUE(contains(o.acceptor, "--dist-key differs")) << o.acceptor;
}

TEST(DistAuth, KeyOnTheAcceptorOnlyIsReportedOnBothSides) {
    std::string got;
    const auto o = handshake(
        [&](Socket& s) {
            authenticate_connector(s, DistKey{}, Channel::control);  // nothing to do
            Connection c(std::move(s));
            c.send(encode(Hello{}));
            got = std::get<ErrorFrame>(c.recv_message()).message;
        },
        [](Socket& s) { authenticate_acceptor(s, kKeyA, Channel::control); });
    EXPECT_EQ(o.connector, "");
    EXPECT_TRUE(contains(got, "authentication required")) << got;
    EXPECT_TRUE(contains(o.acceptor, "without authenticating")) << o.acceptor;
}

TEST(DistAuth, KeyOnTheConnectorOnlyIsReportedOnBothSides) {
    const auto o = handshake([](Socket& s) { authenticate_connector(s, kKeyA, Channel::data); },
                             [](Socket& s) { authenticate_acceptor(s, DistKey{}, Channel::data); });
    EXPECT_TRUE(contains(o.connector, "refused the authentication handshake")) << o.connector;
    EXPECT_TRUE(contains(o.connector, "runs without --dist-key")) << o.connector;
    EXPECT_TRUE(contains(o.acceptor, "this side has no --dist-key")) << o.acceptor;
}

TEST(DistAuth, NoKeyOnEitherSideExchangesNothing) {
    const auto o = handshake(
        [](Socket& s) {
            authenticate_connector(s, DistKey{}, Channel::data);
            Connection c(std::move(s));
            c.send(encode(ErrorFrame{"first frame"}));
        },
        [](Socket& s) {
            authenticate_acceptor(s, DistKey{}, Channel::data);
            Connection c(std::move(s));
            if (std::get<ErrorFrame>(c.recv_message()).message != "first frame") throw ds4::Error("frame lost");
        });
    EXPECT_EQ(o.connector, "");
    EXPECT_EQ(o.acceptor, "");
}

TEST(DistAuth, ProofsNameTheSideAndTheChannel) {
    uint8_t nc[kNonceBytes], ns[kNonceBytes];
    std::memset(nc, 1, sizeof nc);
    std::memset(ns, 2, sizeof ns);
    const auto acc = auth_proof(kKeyA, true, Channel::data, nc, ns);
    EXPECT_EQ(acc.size(), kProofBytes);
    EXPECT_NE(acc, auth_proof(kKeyA, false, Channel::data, nc, ns));
    EXPECT_NE(acc, auth_proof(kKeyA, true, Channel::control, nc, ns));
    EXPECT_NE(acc, auth_proof(kKeyB, true, Channel::data, nc, ns));
    ns[5] ^= 1;
    EXPECT_NE(acc, auth_proof(kKeyA, true, Channel::data, nc, ns));
}

// A peer without the key sends back the acceptor's own proof: refused, nothing else happens.
TEST(DistAuth, AReflectedProofFails) {
    const auto o = handshake(
        [](Socket& s) {
            uint8_t m1[12 + kNonceBytes] = {'D', 'S', '4', 'A', 0, 0, 0, 1, 0, 0, 0, 2};
            s.send_all(m1);
            uint8_t m2[8 + kNonceBytes + kProofBytes];
            s.recv_exact(m2, "AUTH2");
            uint8_t m3[8 + kProofBytes] = {'D', 'S', '4', 'A', 0, 0, 0, 0};
            std::memcpy(m3 + 8, m2 + 8 + kNonceBytes, kProofBytes);
            s.send_all(m3);
            uint8_t b;
            s.recv_exact(std::span<uint8_t>(&b, 1), "AUTH4");  // throws: closed
        },
        [](Socket& s) { authenticate_acceptor(s, kKeyA, Channel::data); });
    EXPECT_TRUE(contains(o.connector, "closed the connection")) << o.connector;
    EXPECT_TRUE(contains(o.acceptor, "failed authentication")) << o.acceptor;
}

TEST(DistAuth, AProofForTheOtherChannelFails) {
    const auto o = handshake([](Socket& s) { authenticate_connector(s, kKeyA, Channel::control); },
                             [](Socket& s) { authenticate_acceptor(s, kKeyA, Channel::data); });
    EXPECT_NE(o.connector, "");
    EXPECT_TRUE(contains(o.acceptor, "control channel on the data port")) << o.acceptor;
}

TEST(DistConnection, ABadFrameClosesWithAnErrorFrame) {
    Listener l("127.0.0.1", 0);
    auto acc = std::async(std::launch::async, [&] {
        Connection c(l.accept(), 1024);
        try {
            c.recv();
        } catch (const ProtocolError& e) {
            return std::string(e.what());
        }
        return std::string();
    });
    Connection c(connect_to("127.0.0.1", l.port()));
    // A WORK header declaring 1 MiB, over this reader's 1 KiB bound.
    const uint8_t header[12] = {'D', 'S', '4', 'D', 0, 0, 0, 3, 0, 0x10, 0, 0};
    c.send(header);
    const std::string err = acc.get();
    EXPECT_TRUE(contains(err, "sent a bad frame")) << err;
    const Message m = c.recv_message();
    ASSERT_TRUE(std::holds_alternative<ErrorFrame>(m));
    EXPECT_FALSE(std::get<ErrorFrame>(m).message.empty());
    EXPECT_THROW(c.recv(), TransportError);  // then closed
}

TEST(DistConnection, ConnectRetriesUntilTheListenerIsUp) {
    uint16_t port;
    {
        Listener probe("127.0.0.1", 0);
        port = probe.port();
    }
    auto later = std::async(std::launch::async, [port] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        Listener l("127.0.0.1", port);
        Socket s = l.accept();
        return s.open();
    });
    Socket s = connect_to("127.0.0.1", port);
    EXPECT_TRUE(s.open());
    EXPECT_TRUE(later.get());
}

TEST(DistConnection, ConnectGivesUpWithTheAddress) {
    uint16_t port;
    {
        Listener probe("127.0.0.1", 0);
        port = probe.port();
    }
    try {
        connect_to("127.0.0.1", port, 3, 5);
        ADD_FAILURE();
    } catch (const TransportError& e) {
        EXPECT_TRUE(contains(e.what(), "cannot connect to 127.0.0.1:" + std::to_string(port))) << e.what();
    }
}

TEST(DistConnection, LoopbackAddresses) {
    EXPECT_TRUE(is_loopback("127.0.0.1"));
    EXPECT_TRUE(is_loopback("127.1.2.3"));
    EXPECT_TRUE(is_loopback("localhost"));
    EXPECT_TRUE(is_loopback("::1"));
    EXPECT_FALSE(is_loopback("0.0.0.0"));
    EXPECT_FALSE(is_loopback("192.168.1.5"));
}

}  // namespace

// The peer timeout T (--dist-timeout): an awaited frame that does not come fails after T with
// TimeoutError and shuts the connection; without a limit the same wait is not cut short.
TEST(DistConnection, ASilentPeerFailsTheAwaitedFrameAfterTheTimeout) {
    Listener l("127.0.0.1", 0);
    Socket c = connect_to("127.0.0.1", l.port());
    Socket a = l.accept();  // accepted and then silent
    Connection conn(std::move(c));
    const auto t0 = std::chrono::steady_clock::now();
    try {
        conn.recv(0.3);
        ADD_FAILURE() << "a frame from a silent peer";
    } catch (const TimeoutError& e) {
        EXPECT_TRUE(contains(e.what(), "no answer from 127.0.0.1:")) << e.what();
        EXPECT_TRUE(contains(e.what(), "for 0.3 s")) << e.what();
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(took, 0.29);
    EXPECT_LT(took, 3.0);
    EXPECT_FALSE(conn.open());
    // A frame that does come in time is read whole.
    Socket c2 = connect_to("127.0.0.1", l.port());
    Socket a2 = l.accept();
    Connection sender(std::move(a2)), receiver(std::move(c2));
    std::thread late([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        sender.send(encode(ErrorFrame{"late but in time"}));
    });
    const Frame f = receiver.recv(5);
    late.join();
    EXPECT_EQ(decode_error(f.payload).message, "late but in time");
}

// Without a key, an accepted connection must start its first frame within the handshake
// timeout (min(T, 10 s)); with a key, each handshake message too.
TEST(DistAuth, ASilentConnectionIsClosedAfterTheHandshakeTimeout) {
    const double saved = peer_timeout();
    set_peer_timeout(0.5);
    EXPECT_DOUBLE_EQ(handshake_timeout(), 0.5);
    for (const DistKey& key : {DistKey{}, kKeyA}) {
        Listener l("127.0.0.1", 0);
        Socket c = connect_to("127.0.0.1", l.port());
        Socket a = l.accept();
        const auto t0 = std::chrono::steady_clock::now();
        try {
            authenticate_acceptor(a, key, Channel::data);
            ADD_FAILURE() << "a silent connection got through";
        } catch (const TransportError& e) {
            EXPECT_TRUE(contains(e.what(), "timed out")) << e.what();
        }
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        EXPECT_GE(took, 0.45) << key.enabled();
        EXPECT_LT(took, 3.0) << key.enabled();
    }
    set_peer_timeout(0);
    EXPECT_DOUBLE_EQ(handshake_timeout(), 10.0);  // never unbounded
    set_peer_timeout(60);
    EXPECT_DOUBLE_EQ(handshake_timeout(), 10.0);
    set_peer_timeout(saved);
}

TEST(DistConnection, HandshakeSlotsAreBounded) {
    HandshakeSlots slots(3);
    bool first = false;
    for (int i = 0; i < 3; ++i) EXPECT_TRUE(slots.try_acquire(&first));
    EXPECT_FALSE(slots.try_acquire(&first));
    EXPECT_TRUE(first);  // the first refusal of a burst is reported
    EXPECT_FALSE(slots.try_acquire(&first));
    EXPECT_FALSE(first);
    EXPECT_EQ(slots.in_use(), 3);
    slots.release();
    EXPECT_TRUE(slots.try_acquire(&first));
    EXPECT_FALSE(slots.try_acquire(&first));
    EXPECT_TRUE(first);  // a new burst
}

// A peer that starts a frame and stalls is given up after the peer timeout, even by a read
// that has no deadline of its own (one that waits for the next frame of an idle connection).
TEST(DistConnection, AFrameThatStallsHalfWayFailsAfterThePeerTimeout) {
    const double saved = peer_timeout();
    set_peer_timeout(0.5);
    Listener l("127.0.0.1", 0);
    Socket c = connect_to("127.0.0.1", l.port());
    Socket a = l.accept();
    const auto frame = encode(ErrorFrame{"cut short"});
    a.send_all(std::span<const uint8_t>(frame.data(), 6));  // the magic and half the type
    Connection conn(std::move(c));
    const auto t0 = std::chrono::steady_clock::now();
    try {
        conn.recv();
        ADD_FAILURE() << "a frame from 6 bytes";
    } catch (const TimeoutError& e) {
        EXPECT_TRUE(contains(e.what(), "stopped sending in the middle of a frame")) << e.what();
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_GE(took, 0.45);
    EXPECT_LT(took, 3.0);
    set_peer_timeout(saved);
}
