#include "dist/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstring>
#include <iterator>

#include "common/file_io.h"

namespace ds4::dist {
namespace {

constexpr size_t kAuth1Bytes = 12 + kNonceBytes;
constexpr size_t kAuth2Bytes = 8 + kNonceBytes + kProofBytes;
constexpr size_t kAuth3Bytes = 8 + kProofBytes;
constexpr size_t kAuth4Bytes = 8;
// Status values of AUTH3 / AUTH4.
constexpr uint32_t kAuthOk = 0;
constexpr uint32_t kAuthProofWrong = 1;

void put_u32(uint8_t* p, uint32_t v) {
    p[0] = uint8_t(v >> 24);
    p[1] = uint8_t(v >> 16);
    p[2] = uint8_t(v >> 8);
    p[3] = uint8_t(v);
}
uint32_t get_u32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

void random_bytes(uint8_t* out, size_t n) {
    if (RAND_bytes(out, int(n)) != 1) throw AuthError("no random bytes from OpenSSL (RAND_bytes failed)");
}

bool proof_equal(const uint8_t* a, const std::vector<uint8_t>& b) {
    return b.size() == kProofBytes && CRYPTO_memcmp(a, b.data(), kProofBytes) == 0;
}

// Closes without losing what we sent: stop writing, drain what the peer still sends (briefly),
// then close, so the peer reads our last message instead of a reset.
void linger_close(Socket& s) {
    if (!s.open()) return;
    ::shutdown(s.fd(), SHUT_WR);
    s.set_recv_timeout(1);
    uint8_t buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    try {
        while (std::chrono::steady_clock::now() < deadline) s.recv_some(buf);
    } catch (const TransportError&) {
    }
    s.close();
}

// Sends an ERROR frame (best effort), closes, and throws AuthError(log).
[[noreturn]] void refuse(Socket& s, const std::string& to_peer, const std::string& log) {
    try {
        s.send_all(encode(ErrorFrame{to_peer}));
    } catch (const Error&) {
    }
    linger_close(s);
    throw AuthError(log);
}

// The connector found a frame where AUTH2 belongs: the acceptor runs without a key and refused.
[[noreturn]] void read_refusal(Socket& s, const uint8_t magic[4]) {
    const std::string peer = s.peer();
    std::array<uint8_t, kHeaderBytes> header{};
    std::memcpy(header.data(), magic, 4);
    std::string why;
    try {
        s.recv_exact(std::span<uint8_t>(header.data() + 4, kHeaderBytes - 4), "a frame header");
        const FrameHeader h = decode_header(header, 64 * 1024);
        std::vector<uint8_t> payload(h.bytes);
        s.recv_exact(payload, "a frame");
        why = h.type == FrameType::error ? decode_error(payload).message
                                         : fmt::format("it answered with a {} frame", frame_type_name(h.type));
    } catch (const Error& e) {
        why = e.what();
    }
    s.close();
    throw AuthError(fmt::format("{} refused the authentication handshake: {}", peer, why));
}

}  // namespace

DistKey load_key(const std::string& path) {
    // A regular file only: a FIFO would block the start forever, a device read without end.
    std::string buf;
    try {
        buf = read_regular_file(path, kMaxKeyBytes + 2);
    } catch (const Error& e) {
        const std::string what = e.what();
        if (what.find("more than") != std::string::npos)
            fail("--dist-key {}: the key is longer than {} bytes", path, kMaxKeyBytes);
        fail("--dist-key {}: cannot read the file: {}", path, what.substr(std::min(what.size(), path.size() + 2)));
    }
    DistKey k;
    if (!buf.empty() && buf.back() == '\n') {
        buf.pop_back();
        if (!buf.empty() && buf.back() == '\r') buf.pop_back();
    }
    if (buf.size() > kMaxKeyBytes) fail("--dist-key {}: the key is longer than {} bytes", path, kMaxKeyBytes);
    if (buf.size() < kMinKeyBytes)
        fail("--dist-key {}: the key is {} bytes; it needs at least {} (e.g. `openssl rand -hex 32 > {}`)", path,
             buf.size(), kMinKeyBytes, path);
    k.secret.assign(buf.begin(), buf.end());
    return k;
}

std::vector<uint8_t> auth_proof(const DistKey& key, bool acceptor, Channel channel, const uint8_t* nonce_c,
                                const uint8_t* nonce_s) {
    // The label names the side that proves: a proof reflected back to its sender never verifies.
    const char* label = acceptor ? "ds4 dist v1 acceptor" : "ds4 dist v1 connector";
    const size_t label_bytes = std::strlen(label) + 1;  // with its NUL: unambiguous
    uint8_t msg[32 + 4 + 2 * kNonceBytes];
    std::memcpy(msg, label, label_bytes);
    put_u32(msg + label_bytes, uint32_t(channel));
    std::memcpy(msg + label_bytes + 4, nonce_c, kNonceBytes);
    std::memcpy(msg + label_bytes + 4 + kNonceBytes, nonce_s, kNonceBytes);
    const size_t msg_bytes = label_bytes + 4 + 2 * kNonceBytes;
    std::vector<uint8_t> out(EVP_MAX_MD_SIZE);
    unsigned int len = 0;
    if (!HMAC(EVP_sha256(), key.secret.data(), int(key.secret.size()), msg, msg_bytes, out.data(), &len) ||
        len != kProofBytes)
        throw AuthError("HMAC-SHA256 failed (OpenSSL)");
    out.resize(len);
    return out;
}

void authenticate_connector(Socket& s, const DistKey& key, Channel channel) {
    if (!key.enabled()) return;
    const std::string peer = s.peer();
    s.set_recv_timeout(handshake_timeout());
    uint8_t m1[kAuth1Bytes];
    put_u32(m1, kAuthMagic);
    put_u32(m1 + 4, kAuthVersion);
    put_u32(m1 + 8, uint32_t(channel));
    uint8_t* nonce_c = m1 + 12;
    random_bytes(nonce_c, kNonceBytes);
    s.send_all(m1);

    uint8_t m2[kAuth2Bytes];
    s.recv_exact(std::span<uint8_t>(m2, 4), "the authentication handshake");
    if (get_u32(m2) == kMagic) read_refusal(s, m2);
    if (get_u32(m2) != kAuthMagic) {
        s.close();
        throw AuthError(fmt::format("{} is not a ds4 pipeline peer (no handshake in its answer)", peer));
    }
    s.recv_exact(std::span<uint8_t>(m2 + 4, kAuth2Bytes - 4), "the authentication handshake");
    const uint8_t* nonce_s = m2 + 8;
    const uint8_t* proof_s = m2 + 8 + kNonceBytes;
    uint8_t m3[kAuth3Bytes] = {};
    put_u32(m3, kAuthMagic);
    if (get_u32(m2 + 4) != kAuthOk || !proof_equal(proof_s, auth_proof(key, true, channel, nonce_c, nonce_s))) {
        put_u32(m3 + 4, kAuthProofWrong);
        try {
            s.send_all(m3);
        } catch (const Error&) {
        }
        linger_close(s);
        throw AuthError(fmt::format("authentication with {} failed: its proof does not match our --dist-key "
                                    "(the key files differ)", peer));
    }
    const auto proof_c = auth_proof(key, false, channel, nonce_c, nonce_s);
    std::memcpy(m3 + 8, proof_c.data(), kProofBytes);
    s.send_all(m3);
    uint8_t m4[kAuth4Bytes];
    try {
        s.recv_exact(m4, "the authentication result");
    } catch (const TransportError&) {
        s.close();
        throw AuthError(fmt::format("authentication with {} failed: it closed the connection after our proof "
                                    "(it rejected our --dist-key)", peer));
    }
    if (get_u32(m4) != kAuthMagic || get_u32(m4 + 4) != kAuthOk) {
        s.close();
        throw AuthError(fmt::format("authentication with {} failed: it rejected our proof", peer));
    }
    s.set_recv_timeout(recv_timeout_seconds());
}

void authenticate_acceptor(Socket& s, const DistKey& key, Channel channel) {
    const std::string peer = s.peer();
    uint8_t m1[kAuth1Bytes];
    if (!key.enabled()) {
        // Only a look: without a key the first bytes are the peer's first frame, due as soon as
        // it connected (a silent connection is closed after the handshake timeout).
        s.set_recv_timeout(handshake_timeout());
        s.peek(std::span<uint8_t>(m1, 4), "the first frame");
        s.set_recv_timeout(recv_timeout_seconds());
        if (get_u32(m1) == kAuthMagic) {
            try {
                s.recv_exact(m1, "the authentication handshake");
            } catch (const TransportError&) {
            }
            refuse(s, "this peer runs without --dist-key, but the connecting side started an authentication "
                      "handshake (give both sides the same --dist-key, or neither)",
                   fmt::format("{} started an authentication handshake, but this side has no --dist-key", peer));
        }
        return;
    }
    s.set_recv_timeout(handshake_timeout());
    s.recv_exact(std::span<uint8_t>(m1, 4), "the authentication handshake");
    if (get_u32(m1) == kMagic)
        refuse(s, "authentication required: this peer runs with --dist-key and the connecting side sent no "
                  "handshake (give it the same --dist-key)",
               fmt::format("{} connected without authenticating (no --dist-key on its side?); closed", peer));
    if (get_u32(m1) != kAuthMagic) {
        s.close();
        throw AuthError(fmt::format("{} sent neither a handshake nor a frame; closed", peer));
    }
    s.recv_exact(std::span<uint8_t>(m1 + 4, kAuth1Bytes - 4), "the authentication handshake");
    if (get_u32(m1 + 4) != kAuthVersion) {
        s.close();
        throw AuthError(fmt::format("{} speaks authentication version {} (we speak {}); closed", peer,
                                    get_u32(m1 + 4), kAuthVersion));
    }
    if (get_u32(m1 + 8) != uint32_t(channel)) {
        s.close();
        // Nothing is proven yet: the peer only asked (the proofs come later).
        const uint32_t asked = get_u32(m1 + 8);
        const std::string what = asked == uint32_t(Channel::control) ? "the control channel"
                                 : asked == uint32_t(Channel::data)  ? "the data channel"
                                                                     : fmt::format("unknown channel {}", asked);
        throw AuthError(fmt::format("{} asked to authenticate for {} on the {} port (not authenticated); closed",
                                    peer, what, channel == Channel::control ? "control" : "data"));
    }
    const uint8_t* nonce_c = m1 + 12;
    uint8_t m2[kAuth2Bytes];
    put_u32(m2, kAuthMagic);
    put_u32(m2 + 4, kAuthOk);
    uint8_t* nonce_s = m2 + 8;
    random_bytes(nonce_s, kNonceBytes);
    const auto proof_s = auth_proof(key, true, channel, nonce_c, nonce_s);
    std::memcpy(m2 + 8 + kNonceBytes, proof_s.data(), kProofBytes);
    s.send_all(m2);

    uint8_t m3[kAuth3Bytes];
    s.recv_exact(m3, "the authentication proof");
    if (get_u32(m3) != kAuthMagic) {
        s.close();
        throw AuthError(fmt::format("{} sent no authentication proof; closed", peer));
    }
    if (get_u32(m3 + 4) == kAuthProofWrong) {
        s.close();
        throw AuthError(fmt::format("{} rejected our proof: its --dist-key differs from ours; closed", peer));
    }
    if (get_u32(m3 + 4) != kAuthOk || !proof_equal(m3 + 8, auth_proof(key, false, channel, nonce_c, nonce_s))) {
        s.close();
        throw AuthError(fmt::format("{} failed authentication (its proof does not match our --dist-key); closed", peer));
    }
    uint8_t m4[kAuth4Bytes];
    put_u32(m4, kAuthMagic);
    put_u32(m4 + 4, kAuthOk);
    s.send_all(m4);
    s.set_recv_timeout(recv_timeout_seconds());
}

}  // namespace ds4::dist
