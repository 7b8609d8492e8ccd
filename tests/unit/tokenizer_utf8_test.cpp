// UTF-8 helpers, the GPT-2 byte alphabet and the streaming decoder's hold-back rule.
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace ds4::tokenizer {
namespace {

TEST(TokenizerUtf8, CharLength) {
    EXPECT_EQ(utf8_char_length("a", 0), 1u);
    EXPECT_EQ(utf8_char_length("\xc3\xa9", 0), 2u);
    EXPECT_EQ(utf8_char_length("\xe4\xb8\xad", 0), 3u);
    EXPECT_EQ(utf8_char_length("\xf0\x9f\x91\x8d", 0), 4u);
    EXPECT_EQ(utf8_char_length("\x80", 0), 0u);            // stray continuation
    EXPECT_EQ(utf8_char_length("\xc1\xbf", 0), 0u);        // overlong
    EXPECT_EQ(utf8_char_length("\xe0\x80\xaf", 0), 0u);    // overlong
    EXPECT_EQ(utf8_char_length("\xed\xa0\x80", 0), 0u);    // surrogate
    EXPECT_EQ(utf8_char_length("\xf4\x90\x80\x80", 0), 0u);  // above U+10FFFF
    EXPECT_EQ(utf8_char_length("\xe4\xb8", 0), 0u);        // truncated
}

TEST(TokenizerUtf8, IncompleteSuffix) {
    EXPECT_EQ(utf8_incomplete_suffix(""), 0u);
    EXPECT_EQ(utf8_incomplete_suffix("ab"), 0u);
    EXPECT_EQ(utf8_incomplete_suffix("a\xf0"), 1u);
    EXPECT_EQ(utf8_incomplete_suffix("a\xf0\x9f"), 2u);
    EXPECT_EQ(utf8_incomplete_suffix("a\xf0\x9f\x91"), 3u);
    EXPECT_EQ(utf8_incomplete_suffix("a\xf0\x9f\x91\x8d"), 0u);  // complete
    EXPECT_EQ(utf8_incomplete_suffix("a\xe4\xb8"), 2u);
    EXPECT_EQ(utf8_incomplete_suffix("\x80\x80"), 0u);        // can never complete
    EXPECT_EQ(utf8_incomplete_suffix("\xff"), 0u);
    EXPECT_EQ(utf8_incomplete_suffix("\xed\xa0"), 0u);        // would be a surrogate
    EXPECT_EQ(utf8_incomplete_suffix("\xe4\xb8\xad\x80"), 0u);  // one byte too many
}

TEST(TokenizerUtf8, EncodeDecode) {
    for (uint32_t cp : {0x0u, 0x41u, 0x7Fu, 0x80u, 0x7FFu, 0x800u, 0xFFFFu, 0x10000u, 0x10FFFFu}) {
        std::string s;
        append_utf8(s, cp);
        ASSERT_EQ(utf8_char_length(s, 0), s.size()) << cp;
        EXPECT_EQ(decode_utf8(s, 0, s.size()), cp);
    }
}

// §2.1 step 4: the values the spec lists.
TEST(TokenizerByteLevel, Gpt2Alphabet) {
    EXPECT_EQ(byte_to_codepoint(' '), 0x120u);
    EXPECT_EQ(byte_to_codepoint('\n'), 0x10Au);
    EXPECT_EQ(byte_to_codepoint('\t'), 0x109u);
    EXPECT_EQ(byte_to_codepoint('\r'), 0x10Du);
    EXPECT_EQ(byte_to_codepoint(0x00), 0x100u);
    EXPECT_EQ(byte_to_codepoint(0xAD), 0x143u);
    EXPECT_EQ(byte_to_codepoint('A'), uint32_t('A'));
    EXPECT_EQ(byte_to_codepoint(0xA1), 0xA1u);
    EXPECT_EQ(byte_to_codepoint(0xFF), 0xFFu);
    for (int b = 0; b < 256; ++b) EXPECT_EQ(codepoint_to_byte(byte_to_codepoint(uint8_t(b))), b);
    EXPECT_EQ(codepoint_to_byte(0x20), -1);
    EXPECT_EQ(codepoint_to_byte(0x144), -1);
}

}  // namespace
}  // namespace ds4::tokenizer
