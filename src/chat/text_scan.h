// Text scanning the streaming output parsers share (chat/output_parser.h for DeepSeek V4,
// chat/glm_output_parser.h for GLM): finding markers, and what to hold back at the end of a
// chunk so that no half-formed marker or UTF-8 sequence is ever emitted.
#pragma once

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string_view>
#include <utility>

namespace ds4::chat::scan {

inline bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }

// Bytes at the end of s that begin a UTF-8 sequence which is not complete yet.
inline size_t utf8_partial_tail(std::string_view s) {
    const size_t n = s.size();
    for (size_t back = 1; back <= 3 && back <= n; ++back) {
        const auto c = static_cast<unsigned char>(s[n - back]);
        if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for the lead
        size_t need = 1;
        if ((c & 0xE0) == 0xC0) need = 2;
        else if ((c & 0xF0) == 0xE0) need = 3;
        else if ((c & 0xF8) == 0xF0) need = 4;
        return need > back ? back : 0;
    }
    return 0;
}

// Length of the longest suffix of s that is a proper prefix of one of the markers.
inline size_t marker_partial_tail(std::string_view s, std::span<const std::string_view> markers) {
    size_t best = 0;
    for (std::string_view m : markers) {
        for (size_t k = std::min(s.size(), m.size() - 1); k > best; --k) {
            if (s.substr(s.size() - k) == m.substr(0, k)) {
                best = k;
                break;
            }
        }
    }
    return best;
}

// Earliest occurrence of any marker: {position, marker length}.
inline std::optional<std::pair<size_t, size_t>> find_first(std::string_view s,
                                                           std::span<const std::string_view> markers) {
    std::optional<std::pair<size_t, size_t>> best;
    for (std::string_view m : markers) {
        const size_t p = s.find(m);
        if (p != std::string_view::npos && (!best || p < best->first)) best = {{p, m.size()}};
    }
    return best;
}

}  // namespace ds4::chat::scan
