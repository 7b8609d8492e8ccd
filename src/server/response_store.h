// What ds4-server keeps of finished replies so that a client can continue one by reference
// instead of sending the whole history again (spec/PRODUCT.md §4.8; docs/SERVER.md "Live
// continuations and previous_response_id"):
//   "resp:<id>"  a Responses reply stored under its response id (unless the request said
//                `store: false`), for a later request's previous_response_id;
//   "call:<id>"  a Responses or Anthropic reply that called tools, under each call id, for a
//                later request that sends only the tools' results (live continuation).
// A turn holds the conversation through the reply (messages, for rendering the next prompt)
// and the tokens the live session holds after it (prompt + sampled reply), so that the next
// prompt reuses exactly those tokens whenever it starts with their text (server/continuation.h).
//
// Bounded: at most max_turns keys and max_bytes of distinct turns (a turn kept under several
// keys counts once); the least recently used keys go first. Thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "chat/message.h"

namespace ds4::server {

struct StoredTurn {
    std::vector<chat::Message> messages;  // the conversation through the reply (system included)
    std::vector<int32_t> tokens;          // prompt + sampled reply, as the live session holds them
    std::string text;                     // what `tokens` decode to
    size_t bytes() const;                 // memory held, roughly
};

class ResponseStore {
public:
    static constexpr size_t kDefaultMaxTurns = 1000;
    static constexpr size_t kDefaultMaxBytes = size_t(256) << 20;

    ResponseStore(size_t max_turns = kDefaultMaxTurns, size_t max_bytes = kDefaultMaxBytes);

    // Keeps `turn` under `key` as the most recently used entry (replacing an older value), then
    // drops the least recently used keys over the limits (a turn larger than max_bytes alone
    // is not kept).
    void put(const std::string& key, std::shared_ptr<const StoredTurn> turn);
    // The turn under `key` (marked used), or null.
    std::shared_ptr<const StoredTurn> get(const std::string& key);

    size_t size() const;   // keys
    size_t bytes() const;  // bytes of distinct turns

private:
    struct Entry {
        std::string key;
        std::shared_ptr<const StoredTurn> turn;
    };
    void drop_locked(std::list<Entry>::iterator it);

    size_t max_turns_, max_bytes_;
    mutable std::mutex mutex_;
    std::list<Entry> lru_;  // front: most recently used
    std::unordered_map<std::string, std::list<Entry>::iterator> by_key_;
    std::unordered_map<const StoredTurn*, size_t> refs_;  // keys per distinct turn
    size_t bytes_ = 0;
};

}  // namespace ds4::server
