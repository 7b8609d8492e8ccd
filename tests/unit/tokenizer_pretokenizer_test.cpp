// The joyai-llm pre-tokenizer's pieces (spec/TOKENIZER_CHAT.md §2.1 step 3 and its worked examples).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "common/error.h"
#include "tokenizer/pretokenizer.h"

namespace ds4::tokenizer {
namespace {

std::vector<std::string> pieces(const std::string& text) {
    static const PreTokenizer pre("joyai-llm");
    std::vector<std::string_view> v;
    pre.split(text, v);
    return {v.begin(), v.end()};
}

using P = std::vector<std::string>;

TEST(TokenizerPretokenizer, SpecWorkedExamples) {
    EXPECT_EQ(pieces("    int x = 42;\n"), (P{"   ", " int", " x", " =", " ", "42", ";\n"}));
    EXPECT_EQ(pieces("1234567 apples"), (P{"123", "456", "7", " apples"}));
    EXPECT_EQ(pieces("I've got $100."), (P{"I", "'ve", " got", " $", "100", "."}));
    EXPECT_EQ(pieces("我想在apple工作1314151天～"),
              (P{"我想在", "apple", "工作", "131", "415", "1", "天", "～"}));
    EXPECT_EQ(pieces("a  b\n\n  c"), (P{"a", " ", " b", "\n\n", " ", " c"}));
    EXPECT_EQ(pieces("« Ciao »\n"), (P{"«", " Ciao", " »\n"}));
    EXPECT_EQ(pieces("What is 2+2?"), (P{"What", " is", " ", "2", "+", "2", "?"}));
}

TEST(TokenizerPretokenizer, RegexAlternatives) {
    // Punctuation + ASCII letters; a space before '#' goes to alternative 3 instead.
    EXPECT_EQ(pieces("x #include"), (P{"x", " #", "include"}));
    EXPECT_EQ(pieces("#include"), (P{"#include"}));
    EXPECT_EQ(pieces(".net"), (P{".net"}));
    // Punctuation runs keep their trailing newlines; emoji are symbols.
    EXPECT_EQ(pieces(");\n\nx"), (P{");\n\n", "x"}));
    EXPECT_EQ(pieces("👍!"), (P{"👍!"}));
    EXPECT_EQ(pieces(".»\n\n"), (P{".»\n\n"}));
    // Combining marks stay with their letters; Hangul is not in R2's ranges.
    EXPECT_EQ(pieces("e\xcc\x81t\xc3\xa9 \xed\x95\x9c\xea\xb8\x80"), (P{"e\xcc\x81t\xc3\xa9", " \xed\x95\x9c\xea\xb8\x80"}));
    // U+9FA6 is outside R2's CJK range, U+9FA5 inside it: R2 splits them apart.
    EXPECT_EQ(pieces("\xe9\xbe\xa5\xe9\xbe\xa6"), (P{"\xe9\xbe\xa5", "\xe9\xbe\xa6"}));
}

TEST(TokenizerPretokenizer, UnicodeNumbersAreSplitInThrees) {
    EXPECT_EQ(pieces("١٢٣٤"), (P{"١٢٣", "٤"}));  // Arabic-Indic digits (Nd)
    EXPECT_EQ(pieces("①½Ⅻ²"), (P{"①½Ⅻ", "²"}));  // No, Nl: all \p{N}
    EXPECT_EQ(pieces(" 2"), (P{" ", "2"}));
}

TEST(TokenizerPretokenizer, WhiteSpaceIsUnicodeWhiteSpace) {
    // NBSP and U+0085 are White_Space: the run gives its last character to the next word.
    EXPECT_EQ(pieces("a\xc2\xa0\xc2\xa0" "b"), (P{"a", "\xc2\xa0", "\xc2\xa0" "b"}));
    EXPECT_EQ(pieces("  \xc2\x85" "b"), (P{"  ", "\xc2\x85" "b"}));
    EXPECT_EQ(pieces("\xc2\x85\xc2\x85"), (P{"\xc2\x85\xc2\x85"}));
    // U+FEFF, U+200B and U+180E are not (they are Cf): not a whitespace run.
    EXPECT_EQ(pieces("\xef\xbb\xbf\xef\xbb\xbf"), (P{"\xef\xbb\xbf\xef\xbb\xbf"}));
    EXPECT_EQ(pieces(" \xe1\xa0\x8e"), (P{" ", "\xe1\xa0\x8e"}));
    // (?!\S) sees only its own piece: before a number the whole run stays together.
    EXPECT_EQ(pieces("a   1"), (P{"a", "   ", "1"}));
    EXPECT_EQ(pieces("x\t\t\ny"), (P{"x", "\t\t\n", "y"}));
}

TEST(TokenizerPretokenizer, InvalidUtf8BytesArePiecesOfTheirOwn) {
    EXPECT_EQ(pieces("ab\xff" "cd"), (P{"ab", "\xff", "cd"}));
    EXPECT_EQ(pieces("\xe4\xb8"), (P{"\xe4", "\xb8"}));  // truncated 3-byte sequence
    EXPECT_EQ(pieces("\xed\xa0\x80"), (P{"\xed", "\xa0", "\x80"}));  // a surrogate
    EXPECT_EQ(pieces("\xc0\xaf"), (P{"\xc0", "\xaf"}));  // overlong '/'
}

TEST(TokenizerPretokenizer, PiecesConcatenateToTheInputOnLongRuns) {
    for (const std::string unit : {" ", "a", "1", "\n", "中", ".", " a", "\xff"}) {
        std::string text;
        for (int i = 0; i < 200000; ++i) text += unit;
        std::string joined;
        for (const auto& p : pieces(text)) joined += p;
        EXPECT_EQ(joined, text) << unit;
    }
}

TEST(TokenizerPretokenizer, UnknownNameIsRejected) {
    EXPECT_THROW(PreTokenizer("llama3"), Error);
    EXPECT_NO_THROW(PreTokenizer("deepseek-v3"));
}

TEST(TokenizerPretokenizer, UnknownNameErrorNamesItAndTheKnownOnes) {
    try {
        PreTokenizer("qwen2");
        ADD_FAILURE() << "no error";
    } catch (const Error& e) {
        const std::string m = e.what();
        EXPECT_NE(m.find("'qwen2'"), std::string::npos) << m;
        for (const char* known : {"'joyai-llm'", "'deepseek-v3'", "'glm4'", "'chatglm-bpe'"})
            EXPECT_NE(m.find(known), std::string::npos) << m;
    }
}

// "glm4" (= "chatglm-bpe"): llama.cpp's CHATGLM4 pattern, one split; pieces worked out by hand
// from the regex of src/llama-vocab.cpp.
std::vector<std::string> glm4_pieces(const std::string& text) {
    static const PreTokenizer pre("chatglm-bpe");
    std::vector<std::string_view> v;
    pre.split(text, v);
    return {v.begin(), v.end()};
}

TEST(TokenizerPretokenizer, Glm4Pattern) {
    // The same as DeepSeek's where the patterns agree.
    EXPECT_EQ(glm4_pieces("    int x = 42;\n"), (P{"   ", " int", " x", " =", " ", "42", ";\n"}));
    EXPECT_EQ(glm4_pieces("1234567 apples"), (P{"123", "456", "7", " apples"}));
    EXPECT_EQ(glm4_pieces("I've got $100."), (P{"I", "'ve", " got", " $", "100", "."}));
    EXPECT_EQ(glm4_pieces("a  b\n\n  c"), (P{"a", " ", " b", "\n\n", " ", " c"}));
    // Contractions in either case; a letter run takes one leading non-letter, non-digit.
    EXPECT_EQ(glm4_pieces("WHAT'S it'd"), (P{"WHAT", "'S", " it", "'d"}));
    EXPECT_EQ(glm4_pieces("#include"), (P{"#include"}));
    // No CJK stage: letters of every script are one run (DeepSeek splits 我想在 | apple | 工作).
    EXPECT_EQ(glm4_pieces("我想在apple工作"), (P{"我想在apple工作"}));
    EXPECT_EQ(pieces("我想在apple工作"), (P{"我想在", "apple", "工作"}));
    // Combining marks are not letters here: "é" as e + U+0301 splits.
    EXPECT_EQ(glm4_pieces("e\xcc\x81t"), (P{"e", "\xcc\x81t"}));
}

}  // namespace
}  // namespace ds4::tokenizer
