// Exact tool replay (spec/PRODUCT.md §4.7): tool-call id -> the tool-call text (V4: DSML) the
// model sampled for the reply that made the call, so that when a client sends the call back in its history
// the prompt holds those exact bytes instead of the canonical re-rendering (which may differ
// in whitespace, attribute spelling or JSON formatting), and the live session's tokens stay a
// prefix of the next prompt. The value of an id is the text that replaces the canonical
// block: the whitespace the model wrote before the block opening, then the block through its
// closing tag, exactly as generated (several ids of one reply share one value).
// Bounded LRU: at most max_ids ids and max_bytes of distinct values (oldest used first out).
// Thread-safe. entries_for() / put() let a disk cache save and restore the mappings.
#pragma once

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "chat/message.h"
#include "chat/output.h"

namespace ds4::server {

class ToolMemory {
public:
    static constexpr size_t kDefaultMaxIds = 100000;
    static constexpr size_t kDefaultMaxBytes = size_t(512) << 20;

    // How the chat format reads a bare tool-call block back into its calls (ChatFormat::parse
    // with {thinking = false, tools = true, tools_json}): what replay() checks a block with.
    // `tools_json` is the replaying request's tools array: a format whose arguments are untyped
    // text (GLM) types them by it, as the reply that made the calls was parsed, so the check
    // compares like with like.
    using BlockParser = std::function<chat::ParsedOutput(std::string_view block, const std::string& tools_json)>;
    // A parser that needs no tools (V4: the block carries its types).
    using UntypedBlockParser = std::function<chat::ParsedOutput(std::string_view block)>;

    explicit ToolMemory(BlockParser parse, size_t max_ids = kDefaultMaxIds, size_t max_bytes = kDefaultMaxBytes);
    explicit ToolMemory(UntypedBlockParser parse, size_t max_ids = kDefaultMaxIds, size_t max_bytes = kDefaultMaxBytes);

    // Remembers `id` -> `block` as the most recently used entry (replacing an older value of
    // the id); evicts the least recently used entries over the limits.
    void put(const std::string& id, const std::string& block);
    // The (id, block) pairs of those `ids` that are remembered, in the order of `ids`.
    std::vector<std::pair<std::string, std::string>> entries_for(std::span<const std::string> ids) const;
    // The block when every id is remembered with one and the same block (marks them used).
    std::optional<std::string> block_for(std::span<const std::string> ids);
    // The block to render for an assistant message's tool calls: block_for(their ids), and
    // only when it parses back to exactly these calls (same count, names and arguments as
    // JSON values; the block parsed with the request's `tools_json`), so a client that edited a
    // call gets the canonical rendering of its edit.
    std::optional<std::string> replay(const std::vector<chat::ToolCall>& calls, const std::string& tools_json = {});

    size_t size() const;   // remembered ids
    size_t bytes() const;  // bytes of distinct blocks

private:
    struct Entry {
        std::string id;
        std::shared_ptr<const std::string> block;
    };
    void evict_locked();
    void drop_locked(std::list<Entry>::iterator it);

    BlockParser parse_;
    size_t max_ids_, max_bytes_;
    mutable std::mutex mutex_;
    std::list<Entry> lru_;  // front: most recently used
    std::unordered_map<std::string, std::list<Entry>::iterator> by_id_;
    std::unordered_multimap<size_t, std::weak_ptr<const std::string>> by_hash_;  // value dedup
    size_t bytes_ = 0;
};

}  // namespace ds4::server
