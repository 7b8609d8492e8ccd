// UTF-8 helpers for the tokenizer: validation that matches what PCRE2 accepts in UTF mode
// (no overlongs, no surrogates, nothing above U+10FFFF), encoding, and the prefix test the
// streaming decoder needs to hold back a character split across tokens.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ds4::tokenizer {

// Byte length of the well-formed UTF-8 character that starts at s[i], or 0 if the bytes there
// are not one (a stray continuation byte, an overlong form, a surrogate, a truncated sequence).
size_t utf8_char_length(std::string_view s, size_t i);

// Appends the UTF-8 encoding of cp (cp <= U+10FFFF, not a surrogate).
void append_utf8(std::string& out, uint32_t cp);

// Decodes the well-formed character of `len` bytes at s[i] (len from utf8_char_length).
uint32_t decode_utf8(std::string_view s, size_t i, size_t len);

// Length of the longest suffix of `s` that is an incomplete but so far well-formed character
// (a lead byte plus fewer continuation bytes than it announces): 0..3. Those are the bytes a
// streaming decoder must hold back until the next token completes them.
size_t utf8_incomplete_suffix(std::string_view s);

}  // namespace ds4::tokenizer
