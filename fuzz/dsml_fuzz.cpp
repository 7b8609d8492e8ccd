// libFuzzer target for the streaming model-output parser (src/chat/output_parser.h): the
// first byte sets the options (thinking, tools) and a seed for split points; the rest is
// model output. It is fed whole and in random pieces; the contract says the event stream
// depends only on the whole text (up to how deltas of one kind are split), so the merged
// event sequences must match. Any crash or mismatch is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output_parser.h"

namespace {

using ds4::chat::OutputEvent;

// Events with consecutive text deltas of the same kind (and call) merged.
std::vector<OutputEvent> merged(const std::vector<OutputEvent>& in) {
    std::vector<OutputEvent> out;
    for (const auto& e : in) {
        const bool text = e.kind == OutputEvent::Kind::Reasoning || e.kind == OutputEvent::Kind::Content ||
                          e.kind == OutputEvent::Kind::ToolArguments;
        if (text && e.text.empty()) continue;
        if (text && !out.empty() && out.back().kind == e.kind && out.back().index == e.index)
            out.back().text += e.text;
        else
            out.push_back(e);
    }
    return out;
}

std::vector<OutputEvent> run(std::string_view text, ds4::chat::OutputParserOptions o, uint32_t seed) {
    ds4::chat::OutputParser p(o);
    std::vector<OutputEvent> ev;
    size_t at = 0;
    uint32_t x = seed | 1;
    while (at < text.size()) {
        size_t n = text.size() - at;
        if (seed != 0) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;  // xorshift32: piece sizes 1..8
            n = std::min<size_t>(n, 1 + x % 8);
        }
        p.feed(text.substr(at, n), ev);
        at += n;
    }
    p.finish(ev);
    return merged(ev);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const ds4::chat::OutputParserOptions o{.thinking = (data[0] & 1) != 0, .tools = (data[0] & 2) != 0};
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    const auto whole = run(text, o, 0);
    const auto split = run(text, o, uint32_t(data[0] >> 2) + 1);
    if (whole.size() != split.size()) __builtin_trap();
    for (size_t i = 0; i < whole.size(); ++i)
        if (whole[i].kind != split[i].kind || whole[i].text != split[i].text || whole[i].index != split[i].index)
            __builtin_trap();
    (void)ds4::chat::parse_output(text, o);
    return 0;
}
