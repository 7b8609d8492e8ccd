// Line-number sets for AnswerKind::Lines: "9", "3, 7", "20-22", "line 9 and 15" (numbers and
// ranges; any other text between them is a separator).
#pragma once

#include <cctype>
#include <optional>
#include <set>
#include <string_view>
#include <utility>

namespace ds4::eval {

// The set a spec names; nullopt when it names no line or a range over 10000 lines.
inline std::optional<std::set<long>> parse_line_spec(std::string_view s) {
    std::set<long> out;
    size_t i = 0;
    const auto number = [&](long& v) {
        if (i >= s.size() || !std::isdigit((unsigned char)s[i])) return false;
        v = 0;
        while (i < s.size() && std::isdigit((unsigned char)s[i]) && v < 1000000) v = v * 10 + (s[i++] - '0');
        return true;
    };
    while (i < s.size()) {
        long a = 0;
        if (!number(a)) {
            ++i;
            continue;
        }
        long b = a;
        size_t j = i;
        while (j < s.size() && s[j] == ' ') ++j;
        if (j < s.size() && s[j] == '-') {
            i = j + 1;
            while (i < s.size() && s[i] == ' ') ++i;
            if (!number(b)) return std::nullopt;
        }
        if (b < a) std::swap(a, b);
        if (b - a > 10000) return std::nullopt;
        for (long v = a; v <= b; ++v) out.insert(v);
    }
    if (out.empty()) return std::nullopt;
    return out;
}

}  // namespace ds4::eval
