#include "tokenizer/utf8.h"

namespace ds4::tokenizer {

namespace {

// Total length announced by a lead byte, 0 for a byte that cannot start a character.
size_t lead_length(uint8_t b) {
    if (b < 0x80) return 1;
    if (b >= 0xC2 && b <= 0xDF) return 2;
    if (b >= 0xE0 && b <= 0xEF) return 3;
    if (b >= 0xF0 && b <= 0xF4) return 4;
    return 0;  // continuation byte, C0/C1 (overlong), F5..FF
}

// The allowed range of the byte after a lead byte (RFC 3629 table): it is narrower than
// 80..BF for E0 (overlongs), ED (surrogates), F0 (overlongs) and F4 (> U+10FFFF).
bool second_byte_ok(uint8_t lead, uint8_t b) {
    switch (lead) {
        case 0xE0: return b >= 0xA0 && b <= 0xBF;
        case 0xED: return b >= 0x80 && b <= 0x9F;
        case 0xF0: return b >= 0x90 && b <= 0xBF;
        case 0xF4: return b >= 0x80 && b <= 0x8F;
        default: return b >= 0x80 && b <= 0xBF;
    }
}

bool is_continuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

size_t utf8_char_length(std::string_view s, size_t i) {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    const size_t n = lead_length(p[i]);
    if (n == 0 || i + n > s.size()) return 0;
    if (n >= 2 && !second_byte_ok(p[i], p[i + 1])) return 0;
    for (size_t k = 2; k < n; ++k)
        if (!is_continuation(p[i + k])) return 0;
    return n;
}

void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
        out += char(cp);
    } else if (cp < 0x800) {
        out += char(0xC0 | (cp >> 6));
        out += char(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
        out += char(0xE0 | (cp >> 12));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    } else {
        out += char(0xF0 | (cp >> 18));
        out += char(0x80 | ((cp >> 12) & 0x3F));
        out += char(0x80 | ((cp >> 6) & 0x3F));
        out += char(0x80 | (cp & 0x3F));
    }
}

uint32_t decode_utf8(std::string_view s, size_t i, size_t len) {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data()) + i;
    switch (len) {
        case 1: return p[0];
        case 2: return (uint32_t(p[0] & 0x1F) << 6) | (p[1] & 0x3F);
        case 3: return (uint32_t(p[0] & 0x0F) << 12) | (uint32_t(p[1] & 0x3F) << 6) | (p[2] & 0x3F);
        default:
            return (uint32_t(p[0] & 0x07) << 18) | (uint32_t(p[1] & 0x3F) << 12) |
                   (uint32_t(p[2] & 0x3F) << 6) | (p[3] & 0x3F);
    }
}

size_t utf8_incomplete_suffix(std::string_view s) {
    const auto* p = reinterpret_cast<const uint8_t*>(s.data());
    // A lead byte at most 3 bytes from the end, followed only by continuation bytes.
    for (size_t back = 1; back <= 3 && back <= s.size(); ++back) {
        const size_t i = s.size() - back;
        if (is_continuation(p[i])) continue;
        const size_t n = lead_length(p[i]);
        if (n <= back) return 0;  // ASCII, invalid lead, or already complete
        if (back >= 2 && !second_byte_ok(p[i], p[i + 1])) return 0;
        return back;
    }
    return 0;
}

}  // namespace ds4::tokenizer
