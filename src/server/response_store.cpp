#include "server/response_store.h"

namespace ds4::server {

size_t StoredTurn::bytes() const {
    size_t n = sizeof(StoredTurn) + tokens.size() * sizeof(int32_t) + text.size();
    for (const auto& m : messages) {
        n += sizeof(m) + m.content.size() + m.reasoning.size() + m.tool_call_id.size();
        for (const auto& c : m.tool_calls) n += sizeof(c) + c.id.size() + c.name.size() + c.arguments.size();
    }
    return n;
}

ResponseStore::ResponseStore(size_t max_turns, size_t max_bytes) : max_turns_(max_turns), max_bytes_(max_bytes) {}

void ResponseStore::drop_locked(std::list<Entry>::iterator it) {
    const StoredTurn* t = it->turn.get();
    if (--refs_[t] == 0) {
        refs_.erase(t);
        bytes_ -= t->bytes();
    }
    by_key_.erase(it->key);
    lru_.erase(it);
}

void ResponseStore::put(const std::string& key, std::shared_ptr<const StoredTurn> turn) {
    if (!turn || max_turns_ == 0 || turn->bytes() > max_bytes_) return;
    std::lock_guard lock(mutex_);
    if (auto it = by_key_.find(key); it != by_key_.end()) drop_locked(it->second);
    if (refs_[turn.get()]++ == 0) bytes_ += turn->bytes();
    lru_.push_front({key, std::move(turn)});
    by_key_[key] = lru_.begin();
    while (!lru_.empty() && (lru_.size() > max_turns_ || bytes_ > max_bytes_)) drop_locked(std::prev(lru_.end()));
}

std::shared_ptr<const StoredTurn> ResponseStore::get(const std::string& key) {
    std::lock_guard lock(mutex_);
    const auto it = by_key_.find(key);
    if (it == by_key_.end()) return nullptr;
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->turn;
}

size_t ResponseStore::size() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
}

size_t ResponseStore::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

}  // namespace ds4::server
