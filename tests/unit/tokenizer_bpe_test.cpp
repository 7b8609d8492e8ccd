// Tokenizer behaviour on small hand-made vocabularies written to GGUF: merge order, tie
// breaking, added-token matching only in rendered text, decoding, streaming, load errors, a
// vocabulary of no chat format at all with another pre-tokenizer. (The V4 marker ids and the
// errors for a vocabulary without them are the chat format's: chat_format_test.)
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "chat/markers.h"
#include "common/error.h"
#include "support/vocab_gguf.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace ds4::tokenizer {
namespace {

using Ids = std::vector<int32_t>;
using test::sym;
using test::VocabSpec;

// Vocabularies of tests/support/vocab_gguf.h: byte symbols, the V4 markers (unless a test
// leaves them out), then the spec's extra tokens.
class TokenizerBpe : public ::testing::Test {
protected:
    std::unique_ptr<Tokenizer> load(const VocabSpec& v) { return vocab_.load(v); }
    int32_t id(const std::string& text) const { return vocab_.id(text); }

    test::VocabFile vocab_;
};

VocabSpec abc_vocab() {
    VocabSpec v;
    v.extra = {{"aa", TokenType::Normal}, {"ab", TokenType::Normal}, {"bc", TokenType::Normal},
               {"aaaa", TokenType::Normal}, {sym(' ') + "a", TokenType::Normal},
               {"abc", TokenType::Normal}, {"<｜fim▁hole｜>", TokenType::Control},
               {"[PAD9]", TokenType::Unused}};
    // Ranks: "b c" before "a b", so "abc" becomes a + bc although "ab" is leftmost.
    // "zz q" names no tokens, so it can never apply and is ignored.
    v.merges = {"b c", "a a", "a b", "aa aa", sym(' ') + " a", "zz q"};
    return v;
}

TEST_F(TokenizerBpe, LowestRankFirstLeftmostOnTies) {
    const auto t = load(abc_vocab());
    EXPECT_EQ(t->encode("abc"), (Ids{'a', id("bc")}));  // "abc" is a token but no merge makes it
    EXPECT_EQ(t->encode("ab"), (Ids{id("ab")}));
    EXPECT_EQ(t->encode("aaa"), (Ids{id("aa"), 'a'}));
    EXPECT_EQ(t->encode("aaaaa"), (Ids{id("aaaa"), 'a'}));
    EXPECT_EQ(t->encode(" a"), (Ids{id(sym(' ') + "a")}));
    // Pieces do not merge across the pre-tokenizer's boundaries: "a1a" is a | 1 | a.
    EXPECT_EQ(t->encode("a1a"), (Ids{'a', '1', 'a'}));
    // Every byte is a token, invalid UTF-8 included (byte ids are the bytes' alphabet order).
    EXPECT_EQ(t->encode(std::string("\xff\x00", 2)), (Ids{0xFF, 0x00}));
}

TEST_F(TokenizerBpe, MarkersMatchOnlyInRenderedText) {
    const auto t = load(abc_vocab());
    const std::string kUserText(chat::kUser), kDsmlText(chat::kDsml);
    const std::string text = kUserText + "ab<think>aa" + kDsmlText + "<｜fim▁hole｜>";
    EXPECT_EQ(t->encode(text, Special::Match),
              (Ids{id(kUserText), id("ab"), id("<think>"), id("aa"), id(kDsmlText), id("<｜fim▁hole｜>")}));
    const Ids plain = t->encode(text, Special::Plain);
    for (int32_t i : plain)
        EXPECT_FALSE(t->token_type(i) == TokenType::Control || t->token_type(i) == TokenType::UserDefined)
            << "plain text produced the added token " << t->token_text(i);
    EXPECT_EQ(t->decode(plain), text);
    EXPECT_EQ(t->decode(t->encode(text, Special::Match)), text);
    // Longest match at one position: "</think>" rather than "<" ... ; a partial marker is text.
    EXPECT_EQ(t->encode("</think>", Special::Match), (Ids{id("</think>")}));
    EXPECT_EQ(t->encode("<think", Special::Match), t->encode("<think", Special::Plain));
    // BOS and EOS are the ids tokenizer.ggml.{bos,eos}_token_id declare.
    const auto& s = t->special();
    EXPECT_EQ(s.bos, id(std::string(chat::kBos)));
    EXPECT_EQ(s.eos, id(std::string(chat::kEos)));
    EXPECT_EQ(s.pad, -1);
    EXPECT_EQ(s.unk, -1);
}

// The tokenizer knows no chat format: a vocabulary with no V4 marker (and no BOS / EOS keys)
// loads, and tokenizes with the pre-tokenizer tokenizer.ggml.pre names ("glm4" here: one
// GPT-4-style split, where DeepSeek's splits CJK runs and digits in stages).
TEST_F(TokenizerBpe, LoadsAVocabularyWithoutChatMarkers) {
    VocabSpec v = abc_vocab();
    v.markers = {{"<|user|>", TokenType::Control}, {"<|assistant|>", TokenType::Control}};
    // "a" + the first byte of 我 (E6 88 91): a merge only a pre-tokenizer that keeps "a我" in
    // one piece can apply.
    v.extra.push_back({"a" + sym(0xE6), TokenType::Normal});
    v.merges.push_back("a " + sym(0xE6));
    v.pre = "glm4";
    auto t = load(v);
    EXPECT_EQ(t->special().bos, -1);
    EXPECT_EQ(t->special().eos, -1);
    EXPECT_EQ(t->find(std::string(chat::kUser)), -1);
    EXPECT_EQ(t->encode("abc"), (Ids{'a', id("bc")}));
    // glm4 (one GPT-4-style split) keeps letters and CJK together; DeepSeek's stage R2
    // isolates the CJK run, so the merge cannot apply there.
    EXPECT_EQ(t->encode("a我"), (Ids{id("a" + sym(0xE6)), 0x88, 0x91}));
    EXPECT_EQ(t->encode("<|user|>aa<|assistant|>", Special::Match),
              (Ids{id("<|user|>"), id("aa"), id("<|assistant|>")}));
    EXPECT_EQ(t->decode(t->encode("<|user|>aa", Special::Plain)), "<|user|>aa");
    v.pre = "deepseek-v3";
    t = load(v);
    EXPECT_EQ(t->encode("a我"), (Ids{'a', 0xE6, 0x88, 0x91}));

    // The special ids are whatever the metadata declares.
    v.eos = "<|assistant|>";
    EXPECT_EQ(load(v)->special().eos, id("<|assistant|>"));
}

TEST_F(TokenizerBpe, DecodeBytesAndStreaming) {
    const auto t = load(abc_vocab());
    EXPECT_EQ(t->token_text(' '), "\xc4\xa0");  // stored as U+0120, decodes to a space
    EXPECT_EQ(t->token_bytes(' '), " ");
    EXPECT_EQ(t->token_bytes(id("[PAD9]")), "");  // UNUSED decodes to nothing
    EXPECT_EQ(t->token_bytes(id("<｜fim▁hole｜>")), "<｜fim▁hole｜>");
    EXPECT_THROW(t->token_bytes(-1), Error);
    EXPECT_THROW(t->decode(Ids{t->n_vocab()}), Error);

    // 👍 = F0 9F 91 8D as four byte tokens: nothing shows until the last one.
    StreamDecoder d(*t);
    EXPECT_EQ(d.push('x'), "x");
    EXPECT_EQ(d.push(0xF0), "");
    EXPECT_EQ(d.push(0x9F), "");
    EXPECT_EQ(d.push(0x91), "");
    EXPECT_EQ(d.pending(), 3u);
    EXPECT_EQ(d.push(0x8D), "\xf0\x9f\x91\x8d");
    // A byte that can never start a character is passed through at once.
    EXPECT_EQ(d.push(0xFF), "\xff");
    // An incomplete character at the end comes out on flush.
    EXPECT_EQ(d.push(0xE4), "");
    EXPECT_EQ(d.flush(), "\xe4");
    EXPECT_EQ(d.pending(), 0u);
    // An interrupted sequence is released as soon as it cannot complete.
    EXPECT_EQ(d.push(0xE4), "");
    EXPECT_EQ(d.push('a'), "\xe4" "a");
}

TEST_F(TokenizerBpe, LoadErrorsNameTheProblem) {
    auto expect_error = [&](VocabSpec v, const std::string& needle) {
        try {
            load(v);
            ADD_FAILURE() << "no error, expected one mentioning " << needle;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
        }
    };
    VocabSpec v = abc_vocab();
    v.model = "none";
    expect_error(v, "tokenizer.ggml.model");
    v = abc_vocab();
    v.pre = "llama3";
    expect_error(v, "llama3");
    expect_error(v, "'glm4'");  // the message lists the known pre-tokenizers
    v = abc_vocab();
    v.merges.push_back("b b");  // "bb" is not a token
    expect_error(v, "merges[6]");
    v = abc_vocab();
    v.merges.push_back("nospace");
    expect_error(v, "merges[6]");
    v = abc_vocab();
    v.drop_byte_A = true;
    expect_error(v, "0x41");
}

}  // namespace
}  // namespace ds4::tokenizer
