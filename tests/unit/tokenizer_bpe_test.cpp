// Tokenizer behaviour on small hand-made vocabularies written to GGUF: merge order, tie
// breaking, added-token matching only in rendered text, decoding, streaming, load errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "common/error.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ds4::tokenizer {
namespace {

using gguf::Value;
using Ids = std::vector<int32_t>;

// ids 0..255: the byte symbols in byte order; then the markers; then `extra` tokens.
struct VocabSpec {
    std::string model = "gpt2";
    std::string pre = "joyai-llm";
    std::vector<std::pair<std::string, TokenType>> extra;
    std::vector<std::string> merges;
    std::vector<std::string> skip_markers;  // markers left out
    bool drop_byte_A = false;
};

std::string sym(uint8_t b) {
    std::string s;
    append_utf8(s, byte_to_codepoint(b));
    return s;
}

class TokenizerBpe : public ::testing::Test {
protected:
    void TearDown() override { std::filesystem::remove(path_); }

    std::unique_ptr<Tokenizer> load(const VocabSpec& v) {
        std::vector<std::string> tokens;
        std::vector<int32_t> types;
        for (int b = 0; b < 256; ++b) {
            tokens.push_back(v.drop_byte_A && b == 'A' ? "[no A]" : sym(uint8_t(b)));
            types.push_back(int32_t(TokenType::Normal));
        }
        const std::pair<std::string_view, TokenType> markers[] = {
            {kBosText, TokenType::Control},   {kEosText, TokenType::Control},
            {kUserText, TokenType::Control},  {kAssistantText, TokenType::Control},
            {kThinkText, TokenType::UserDefined}, {kThinkEndText, TokenType::UserDefined},
            {kDsmlText, TokenType::UserDefined},
        };
        for (const auto& [text, type] : markers) {
            if (std::find(v.skip_markers.begin(), v.skip_markers.end(), text) != v.skip_markers.end())
                continue;
            ids_[std::string(text)] = int32_t(tokens.size());
            tokens.emplace_back(text);
            types.push_back(int32_t(type));
        }
        for (const auto& [text, type] : v.extra) {
            ids_[text] = int32_t(tokens.size());
            tokens.push_back(text);
            types.push_back(int32_t(type));
        }
        {
            gguf::Writer w(path_);
            w.set("tokenizer.ggml.model", Value::str(v.model));
            w.set("tokenizer.ggml.pre", Value::str(v.pre));
            w.set("tokenizer.ggml.tokens", Value::array_str(tokens));
            w.set("tokenizer.ggml.token_type", Value::array_i32(types));
            w.set("tokenizer.ggml.merges", Value::array_str(v.merges));
            w.begin_data();
            w.finish();
        }
        file_ = gguf::File::open(path_);
        return Tokenizer::from_gguf(*file_);
    }
    int32_t id(const std::string& text) const { return ids_.at(text); }

    std::string path_ = (std::filesystem::temp_directory_path() /
                         ("ds4-tok-" + std::to_string(::getpid()) + ".gguf")).string();
    std::unique_ptr<gguf::File> file_;
    std::map<std::string, int32_t> ids_;
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
    const std::string text = std::string(kUserText) + "ab<think>aa" + std::string(kDsmlText) + "<｜fim▁hole｜>";
    EXPECT_EQ(t->encode(text, Special::Match),
              (Ids{id(std::string(kUserText)), id("ab"), id("<think>"), id("aa"),
                   id(std::string(kDsmlText)), id("<｜fim▁hole｜>")}));
    const Ids plain = t->encode(text, Special::Plain);
    for (int32_t i : plain)
        EXPECT_FALSE(t->token_type(i) == TokenType::Control || t->token_type(i) == TokenType::UserDefined)
            << "plain text produced the added token " << t->token_text(i);
    EXPECT_EQ(t->decode(plain), text);
    EXPECT_EQ(t->decode(t->encode(text, Special::Match)), text);
    // Longest match at one position: "</think>" rather than "<" ... ; a partial marker is text.
    EXPECT_EQ(t->encode("</think>", Special::Match), (Ids{id("</think>")}));
    EXPECT_EQ(t->encode("<think", Special::Match), t->encode("<think", Special::Plain));
    const auto& s = t->special();
    EXPECT_EQ(s.bos, id(std::string(kBosText)));
    EXPECT_EQ(s.eos, id(std::string(kEosText)));
    EXPECT_EQ(s.user, id(std::string(kUserText)));
    EXPECT_EQ(s.assistant, id(std::string(kAssistantText)));
    EXPECT_EQ(s.think, id("<think>"));
    EXPECT_EQ(s.think_end, id("</think>"));
    EXPECT_EQ(s.dsml, id(std::string(kDsmlText)));
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
    v = abc_vocab();
    v.skip_markers = {std::string(kThinkText)};
    expect_error(v, "<think>");
    v = abc_vocab();
    v.skip_markers = {std::string(kDsmlText)};
    expect_error(v, std::string(kDsmlText));
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
