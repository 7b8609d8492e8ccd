// Authentication of pipeline connections with a shared secret (--dist-key FILE; the threat
// model is in docs/DISTRIBUTED.md). Every control and data connection starts with a mutual
// challenge-response before any frame:
//
//   connector -> acceptor  AUTH1  magic "DS4A", version 1, channel, nonce_c (32 random bytes)
//   acceptor -> connector  AUTH2  magic, status 0, nonce_s (32 random bytes),
//                                 proof_s = HMAC-SHA256(key, "ds4 dist v1 acceptor" | channel | nonce_c | nonce_s)
//   connector -> acceptor  AUTH3  magic, status (0, or 1: proof_s was wrong), proof_c =
//                                 HMAC-SHA256(key, "ds4 dist v1 connector" | channel | nonce_c | nonce_s)
//   acceptor -> connector  AUTH4  magic, status 0
//
// Both proofs cover both fresh nonces (no replay) and name the direction (an answer reflected
// back to its sender does not verify) and the channel (control or data). Proofs are compared in
// constant time (CRYPTO_memcmp), nonces come from RAND_bytes. A peer that fails gets nothing
// but a closed connection; each side throws AuthError saying what happened.
//
// Each handshake message is awaited at most handshake_timeout() (dist/connection.h): 10 s, or
// --dist-timeout when shorter. Without a key nothing is exchanged (upstream's protocol as it
// is), but the acceptor waits that long at most for the first frame to begin. A key on one
// side only is reported clearly on both: the keyed acceptor sees a frame where the handshake
// belongs and answers with an ERROR frame; the keyless acceptor sees "DS4A" where a frame
// belongs and answers with an ERROR frame, which the keyed connector reports.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/error.h"
#include "dist/connection.h"

namespace ds4::dist {

class AuthError : public Error {
public:
    using Error::Error;
};

inline constexpr uint32_t kAuthMagic = 0x44533441;  // "DS4A"
inline constexpr uint32_t kAuthVersion = 1;
inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;
inline constexpr size_t kMinKeyBytes = 16;
inline constexpr size_t kMaxKeyBytes = 4096;

enum class Channel : uint32_t { control = 1, data = 2 };

// The shared secret; empty = no authentication.
struct DistKey {
    std::vector<uint8_t> secret;
    bool enabled() const { return !secret.empty(); }
};

// Reads FILE's bytes as the key (one trailing newline, "\n" or "\r\n", is not part of it).
// Throws Error when the file cannot be read, or the key is shorter than kMinKeyBytes or longer
// than kMaxKeyBytes.
DistKey load_key(const std::string& path);

// The handshake on a fresh connection, from the side that connected / accepted. With an empty
// key: the connector does nothing; the acceptor only checks (without consuming) that the peer
// does not start a handshake. Throws AuthError on failure (the socket is then closed) and
// TransportError when the connection breaks.
void authenticate_connector(Socket& s, const DistKey& key, Channel channel);
void authenticate_acceptor(Socket& s, const DistKey& key, Channel channel);

// HMAC-SHA256 of the proof (exposed for the tests).
std::vector<uint8_t> auth_proof(const DistKey& key, bool acceptor, Channel channel, const uint8_t* nonce_c,
                                const uint8_t* nonce_s);

}  // namespace ds4::dist
