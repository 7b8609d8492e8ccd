// The expert cache's size (docs/SSD_STREAMING.md, "Budget"): --ssd-streaming-cache-experts N
// (exactly N slots), NGB / NMB (bytes, converted to whole slots of this file's largest expert),
// or automatic (what memory is left after the resident weights, the KV state and a margin).
#pragma once

#include <cstdint>
#include <string>

namespace ds4::streaming {

struct BudgetRequest {
    enum class Kind { Auto, Slots, Bytes } kind = Kind::Auto;
    int64_t value = 0;   // slots or bytes
    std::string text;    // as given ("auto" when not)
};

// "N" (slots), "NGB"/"NGiB"/"NG" or "NMB"/"NMiB"/"NM" (binary units; the number may have a
// fraction: "1.5GB"), or "auto". Throws ds4::Error for anything else and for zero.
BudgetRequest parse_budget(const std::string& text);
// A CLI11-style check: empty when `text` parses, else the reason (without the flag's name,
// which CLI11 adds).
std::string budget_error(const std::string& text);

// What the cache is sized against.
struct BudgetInputs {
    uint64_t slot_bytes = 0;       // bytes one slot takes (ExpertCache::slot_bytes)
    uint64_t expert_bytes = 0;     // gate+up+down of the largest expert in the file
    int64_t n_expert = 0;          // per layer
    int64_t n_expert_used = 0;     // per token and layer: the fewest slots that can run
    int64_t n_layers = 0;          // layers with routed experts the model holds
    int64_t available = -1;        // bytes this process can still get (-1: unknown)
    int64_t reserved = 0;          // bytes still to come besides the cache (KV state, scratch)
};

struct Budget {
    std::string requested;         // as asked ("auto", "64", "12GB")
    int64_t slots = 0;
    uint64_t bytes = 0;            // slots * slot_bytes
    bool holds_two_layers = false; // slots >= 2 * n_expert
    std::string note;              // why the effective value differs from the request, if it does
};

// The effective budget, or ds4::Error: zero or fewer slots than n_expert_used, a byte budget
// smaller than n_expert_used experts, or more than the memory available after `reserved`.
// Auto: (available - reserved - margin) in whole slots, capped at the model's expert count,
// where margin = max(1 GiB, available / 10).
Budget resolve_budget(const BudgetRequest& req, const BudgetInputs& in);

// The startup line: "ssd streaming: cache requested auto, effective 12.00 GiB (1300 experts,
// 9.45 MiB each) ...".
std::string describe(const Budget& b, const BudgetInputs& in);

}  // namespace ds4::streaming
