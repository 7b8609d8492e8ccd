// The GPT-2 byte-level alphabet (spec/TOKENIZER_CHAT.md §2.1 step 4): every byte maps to one code
// point, so BPE tokens are strings over 256 printable symbols. Bytes 0x21..0x7E, 0xA1..0xAC
// and 0xAE..0xFF map to themselves; the other 68, in increasing order, to U+0100..U+0143.
#pragma once

#include <cstdint>

namespace ds4::tokenizer {

uint32_t byte_to_codepoint(uint8_t b);
// The byte whose symbol is cp, or -1 when cp is not in the alphabet.
int codepoint_to_byte(uint32_t cp);

}  // namespace ds4::tokenizer
