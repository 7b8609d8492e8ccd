#include "server/tool_memory.h"

#include <functional>
#include <nlohmann/json.hpp>

namespace ds4::server {

ToolMemory::ToolMemory(BlockParser parse, size_t max_ids, size_t max_bytes)
    : parse_(std::move(parse)), max_ids_(std::max<size_t>(max_ids, 1)), max_bytes_(max_bytes) {}

ToolMemory::ToolMemory(UntypedBlockParser parse, size_t max_ids, size_t max_bytes)
    : ToolMemory(BlockParser([parse = std::move(parse)](std::string_view block, const std::string&) {
                     return parse(block);
                 }),
                 max_ids, max_bytes) {}

void ToolMemory::put(const std::string& id, const std::string& block) {
    std::lock_guard lock(mutex_);
    if (auto it = by_id_.find(id); it != by_id_.end()) drop_locked(it->second);
    // Ids of one reply (and a restored cache's repeats) share one copy of the value.
    const size_t h = std::hash<std::string>{}(block);
    std::shared_ptr<const std::string> shared;
    for (auto [a, b] = by_hash_.equal_range(h); a != b; ++a) {
        auto p = a->second.lock();
        if (p && *p == block) {
            shared = std::move(p);
            break;
        }
    }
    if (!shared) {
        shared = std::make_shared<const std::string>(block);
        by_hash_.emplace(h, shared);
        bytes_ += block.size();
    }
    lru_.push_front({id, std::move(shared)});
    by_id_[id] = lru_.begin();
    evict_locked();
}

void ToolMemory::drop_locked(std::list<Entry>::iterator it) {
    if (it->block.use_count() == 1) {  // the last id of this value: forget the value too
        bytes_ -= it->block->size();
        const size_t h = std::hash<std::string>{}(*it->block);
        for (auto [a, b] = by_hash_.equal_range(h); a != b; ++a) {
            if (a->second.lock() == it->block) {
                by_hash_.erase(a);
                break;
            }
        }
    }
    by_id_.erase(it->id);
    lru_.erase(it);
}

void ToolMemory::evict_locked() {
    while (lru_.size() > 1 && (lru_.size() > max_ids_ || bytes_ > max_bytes_)) drop_locked(std::prev(lru_.end()));
}

std::vector<std::pair<std::string, std::string>> ToolMemory::entries_for(std::span<const std::string> ids) const {
    std::lock_guard lock(mutex_);
    std::vector<std::pair<std::string, std::string>> out;
    for (const auto& id : ids)
        if (auto it = by_id_.find(id); it != by_id_.end()) out.emplace_back(id, *it->second->block);
    return out;
}

std::optional<std::string> ToolMemory::block_for(std::span<const std::string> ids) {
    std::lock_guard lock(mutex_);
    if (ids.empty()) return std::nullopt;
    std::shared_ptr<const std::string> block;
    for (const auto& id : ids) {
        auto it = by_id_.find(id);
        if (it == by_id_.end()) return std::nullopt;
        if (block && *block != *it->second->block) return std::nullopt;
        block = it->second->block;
    }
    for (const auto& id : ids) lru_.splice(lru_.begin(), lru_, by_id_[id]);
    return *block;
}

std::optional<std::string> ToolMemory::replay(const std::vector<chat::ToolCall>& calls, const std::string& tools_json) {
    std::vector<std::string> ids;
    for (const auto& c : calls) ids.push_back(c.id);
    auto block = block_for(ids);
    if (!block) return std::nullopt;
    const chat::ParsedOutput p = parse_(*block, tools_json);
    if (p.malformed || p.unterminated || !p.content.empty() || p.tool_calls.size() != calls.size())
        return std::nullopt;
    for (size_t i = 0; i < calls.size(); ++i) {
        if (p.tool_calls[i].name != calls[i].name) return std::nullopt;
        const auto sent = nlohmann::json::parse(calls[i].arguments, nullptr, false);
        const auto sampled = nlohmann::json::parse(p.tool_calls[i].arguments, nullptr, false);
        if (sent.is_discarded() || sampled.is_discarded() || sent != sampled) return std::nullopt;
    }
    return block;
}

size_t ToolMemory::size() const {
    std::lock_guard lock(mutex_);
    return lru_.size();
}

size_t ToolMemory::bytes() const {
    std::lock_guard lock(mutex_);
    return bytes_;
}

}  // namespace ds4::server
