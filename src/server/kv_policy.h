// When ds4-server writes disk KV checkpoints and how a hit is checked (spec/PRODUCT.md §5.3;
// docs/SERVER.md "Disk KV cache"). Pure functions over token sequences, so the policy is tested
// without a model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "chat/conversation.h"
#include "chat/format.h"

namespace ds4::tokenizer {
class Tokenizer;
}

namespace ds4::server {

struct KvPolicy {
    int64_t min_tokens = 512;             // nothing shorter is stored or loaded
    int64_t cold_max_tokens = 30000;      // cold saves only for prompts up to this; 0: none
    int64_t continued_interval = 10000;   // saves at absolute multiples of this (rounded up to
                                          // boundary_align); 0: none
    int64_t boundary_trim = 32;           // a cold save without a chat anchor stops this far
    int64_t boundary_align = 2048;        // before the end, aligned down to this
};

// Where a cold save of `prompt` (nothing reused) stops, 0 for none: the chat anchor (the last
// user-turn marker before the first assistant-turn marker, the chat format's `markers`; V4:
// <｜User｜>, <｜Assistant｜>: the system prompt and tools every session of an agent shares)
// when it holds at least min_tokens; else len - trim aligned down to align.
int64_t cold_store_point(std::span<const int32_t> prompt, const KvPolicy& p,
                         const chat::MarkerIds& markers);

// The continued-save step (interval rounded up to align), 0 when off; and the first frontier
// after `pos`.
int64_t continued_step(const KvPolicy& p);
int64_t next_frontier(int64_t pos, const KvPolicy& p);

// The control tokens of `tokens` (every id that is not ordinary BPE text) with the byte offset
// where each starts in the decoded text, for those starting before `max_bytes`. A disk hit
// is keyed by text; two prompts with equal bytes but a marker in one and look-alike user text
// in the other differ here, and such a hit is refused (user text must never load as markers).
struct ControlToken {
    size_t offset;
    int32_t id;
    bool operator==(const ControlToken&) const = default;
};
std::vector<ControlToken> control_tokens(const tokenizer::Tokenizer& tok, std::span<const int32_t> tokens,
                                         size_t max_bytes = SIZE_MAX);

// The part of a rendered prompt from byte `from` on, with its untrusted spans (clipped).
chat::RenderedPrompt rendered_suffix(const chat::RenderedPrompt& p, size_t from);

}  // namespace ds4::server
