#include "streaming/budget.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "common/error.h"
#include "streaming/expert_cache.h"

namespace ds4::streaming {

BudgetRequest parse_budget(const std::string& text) {
    BudgetRequest r;
    r.text = text;
    if (text == "auto" || text.empty()) {
        r.text = "auto";
        return r;
    }
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    const std::string num = text.substr(0, i), unit = text.substr(i);
    const auto bad = [&] {
        fail("--ssd-streaming-cache-experts '{}': expected a number of experts (64), a size (12GB, "
             "512MB) or auto", text);
    };
    if (num.empty() || std::count(num.begin(), num.end(), '.') > 1) bad();
    if (unit.empty()) {
        if (num.find('.') != std::string::npos) bad();
        if (num.size() > 15) fail("--ssd-streaming-cache-experts '{}': too many experts", text);
        r.kind = BudgetRequest::Kind::Slots;
        r.value = std::stoll(num);
    } else {
        std::string u;
        for (char c : unit) u += char(std::toupper(static_cast<unsigned char>(c)));
        double scale = 0;
        if (u == "G" || u == "GB" || u == "GIB") scale = double(uint64_t(1) << 30);
        else if (u == "M" || u == "MB" || u == "MIB") scale = double(uint64_t(1) << 20);
        else bad();
        const double v = std::strtod(num.c_str(), nullptr) * scale;
        if (!(v < 9.0e18)) fail("--ssd-streaming-cache-experts '{}': too large", text);
        r.kind = BudgetRequest::Kind::Bytes;
        r.value = int64_t(v);
    }
    if (r.value <= 0) fail("--ssd-streaming-cache-experts '{}': the cache needs at least one expert", text);
    return r;
}

std::string budget_error(const std::string& text) {
    try {
        parse_budget(text);
        return {};
    } catch (const Error& e) {
        // CLI11 puts the flag in front itself.
        std::string m = e.what();
        const std::string flag = "--ssd-streaming-cache-experts ";
        return m.rfind(flag, 0) == 0 ? m.substr(flag.size()) : m;
    }
}

Budget resolve_budget(const BudgetRequest& req, const BudgetInputs& in) {
    if (in.slot_bytes == 0 || in.n_expert_used < 1 || in.n_layers < 1) fail("expert cache: no routed experts");
    const int64_t all = in.n_expert * in.n_layers;
    const int64_t min_slots = in.n_expert_used;
    const int64_t room = in.available < 0 ? -1 : std::max<int64_t>(0, in.available - in.reserved);
    Budget b;
    b.requested = req.text;
    switch (req.kind) {
        case BudgetRequest::Kind::Slots:
            b.slots = req.value;
            if (b.slots < min_slots)
                fail("--ssd-streaming-cache-experts {}: at least {} experts are needed (one token's "
                     "experts of a layer)", req.text, min_slots);
            break;
        case BudgetRequest::Kind::Bytes:
            b.slots = int64_t(uint64_t(req.value) / in.slot_bytes);
            if (b.slots < min_slots)
                fail("--ssd-streaming-cache-experts {}: holds {} experts of {}, at least {} are needed "
                     "(one token's experts of a layer: {})", req.text, b.slots, human_bytes(in.slot_bytes),
                     min_slots, human_bytes(uint64_t(min_slots) * in.slot_bytes));
            break;
        case BudgetRequest::Kind::Auto: {
            if (room < 0) {
                // Memory unknown: two layers' experts (prefill reads a layer ahead), no more.
                b.slots = std::min(all, std::max(min_slots, 2 * in.n_expert));
                b.note = "available memory unknown: two layers' experts";
            } else {
                const int64_t margin = std::max<int64_t>(int64_t(1) << 30, in.available / 10);
                b.slots = std::max<int64_t>(0, room - margin) / int64_t(in.slot_bytes);
                if (b.slots < min_slots)
                    fail("ssd streaming: {} of memory is available and {} is still needed besides the "
                         "cache (KV state, scratch) plus a {} margin: no room for the {} experts the "
                         "cache needs at least ({}); free memory, lower --ctx, or pass "
                         "--ssd-streaming-cache-experts {}", human_bytes(uint64_t(in.available)),
                         human_bytes(uint64_t(in.reserved)), human_bytes(uint64_t(margin)), min_slots,
                         human_bytes(uint64_t(min_slots) * in.slot_bytes), min_slots);
            }
            break;
        }
    }
    // An explicit request is checked as asked, before the cap: asking for more memory than
    // there is is a mistake even when the model is smaller.
    if (req.kind != BudgetRequest::Kind::Auto && room >= 0) {
        const uint64_t asked = req.kind == BudgetRequest::Kind::Bytes ? uint64_t(req.value)
                                                                       : uint64_t(b.slots) * in.slot_bytes;
        if (asked > uint64_t(room))
            fail("--ssd-streaming-cache-experts {}: asks for {} but only {} of memory is available besides "
                 "{} for the KV state and scratch; at most {} experts ({}) fit", req.text, human_bytes(asked),
                 human_bytes(uint64_t(in.available)), human_bytes(uint64_t(in.reserved)),
                 uint64_t(room) / in.slot_bytes, human_bytes(uint64_t(room) / in.slot_bytes * in.slot_bytes));
    }
    if (b.slots > all) {
        if (req.kind != BudgetRequest::Kind::Auto || b.note.empty())
            b.note = fmt::format("capped at the model's {} experts", all);
        b.slots = all;
    }
    b.bytes = uint64_t(b.slots) * in.slot_bytes;
    b.holds_two_layers = b.slots >= 2 * in.n_expert;
    return b;
}

std::string describe(const Budget& b, const BudgetInputs& in) {
    return fmt::format("ssd streaming: expert cache requested {}, effective {} ({} experts of {} each, "
                       "slot {}; {} of the model's {}){}{}",
                       b.requested, human_bytes(b.bytes), b.slots, human_bytes(in.expert_bytes),
                       human_bytes(in.slot_bytes), b.slots >= in.n_expert * in.n_layers ? "all" : "part",
                       in.n_expert * in.n_layers,
                       b.holds_two_layers ? "; holds two layers' experts" : "",
                       b.note.empty() ? "" : "; " + b.note);
}

}  // namespace ds4::streaming
