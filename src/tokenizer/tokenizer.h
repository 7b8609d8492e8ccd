// Byte-level BPE tokenizer from GGUF metadata (spec/TOKENIZER_CHAT.md §1, §2):
// tokenizer.ggml.tokens / token_type / merges, model "gpt2", and the pre-tokenizer that
// tokenizer.ggml.pre names (pretokenizer.h has the table of known ones).
//
// The tokenizer knows no chat format: its special tokens are what the file declares, BOS, EOS,
// padding and unknown from tokenizer.ggml.*_token_id, and the added tokens from their token
// types. A chat format's markers (chat/format.h) are resolved through find() by the format.
//
// encode(text, Special::Plain) treats every byte as text: control-token strings in user text
// are tokenized as ordinary BPE (DS4's tokenize_text). encode(text, Special::Match) is for
// trusted rendered chat text: added tokens (CONTROL and USER_DEFINED) are matched literally,
// leftmost and longest first, and the text between them is tokenized as plain text
// (tokenize_rendered_chat).
//
// decode() turns ids back into bytes: ordinary tokens through the byte-level alphabet, added
// tokens as their literal text, UNUSED ids as nothing. A token can end inside a UTF-8
// character; StreamDecoder (stream_decoder.h) holds such bytes back when streaming.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/pretokenizer.h"

namespace ds4::gguf {
class File;
}

namespace ds4::tokenizer {

// llama.cpp token types (gguf tokenizer.ggml.token_type).
enum class TokenType : int32_t {
    Normal = 1, Unknown = 2, Control = 3, UserDefined = 4, Unused = 5, Byte = 6,
};

// The ids the file declares (tokenizer.ggml.bos_token_id, eos_token_id, padding_token_id,
// unknown_token_id); -1 where the key is absent. EOS ends generation (engine::Engine).
struct SpecialTokens {
    int32_t bos = -1, eos = -1, pad = -1, unk = -1;
};

enum class Special { Plain, Match };

class Tokenizer {
public:
    // Reads the tokenizer.ggml.* keys of `file`. Throws ds4::Error naming the file and key on
    // a missing or malformed key, an unsupported model or unknown pre-tokenizer, a special
    // token id outside the vocabulary, a byte symbol missing from the vocabulary, or a merge
    // whose result is not a token.
    static std::unique_ptr<Tokenizer> from_gguf(const gguf::File& file);

    // Token ids of `text` (no BOS is added). Thread-safe.
    std::vector<int32_t> encode(std::string_view text, Special special = Special::Plain) const;
    void encode_append(std::string_view text, Special special, std::vector<int32_t>& out) const;

    // Bytes of the ids, concatenated. Throws ds4::Error on an id outside the vocabulary.
    std::string decode(std::span<const int32_t> ids) const;
    // Bytes one token decodes to (may be part of a UTF-8 character).
    const std::string& token_bytes(int32_t id) const;
    // The token's string as stored in the vocabulary (byte-level alphabet for BPE tokens).
    const std::string& token_text(int32_t id) const;
    TokenType token_type(int32_t id) const;
    // Id of the vocabulary entry spelled exactly `text`, or -1.
    int32_t find(std::string_view text) const;

    int32_t n_vocab() const { return int32_t(tokens_.size()); }
    size_t n_merges() const { return n_merges_; }
    const SpecialTokens& special() const { return special_; }

    Tokenizer(const Tokenizer&) = delete;
    Tokenizer& operator=(const Tokenizer&) = delete;
    ~Tokenizer();

private:
    explicit Tokenizer(const std::string& pre);
    void read_special(const gguf::File& f);
    void index_added();
    void check_id(int32_t id) const;
    void encode_plain(std::string_view text, std::vector<int32_t>& out) const;
    void bpe_piece(std::string_view piece, std::vector<int32_t>& out) const;

    struct Merge {
        uint32_t rank;
        int32_t result;
    };

    PreTokenizer pre_;
    std::vector<std::string> tokens_;       // [n_vocab] as stored
    std::vector<TokenType> types_;          // [n_vocab]
    std::vector<std::string> bytes_;        // [n_vocab] decoded bytes
    std::unordered_map<std::string_view, int32_t> by_text_;  // views into tokens_
    int32_t byte_id_[256] = {};             // token of each single byte symbol
    std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank, result
    size_t n_merges_ = 0;

    // Added tokens matched in Special::Match text, by exact text; lengths longest first.
    std::unordered_map<std::string_view, int32_t> added_;
    std::vector<size_t> added_lengths_;
    bool added_first_byte_[256] = {};

    SpecialTokens special_;

    // BPE results of recent pieces: text repeats a lot (" the", "    "), BPE is the cost.
    mutable std::mutex cache_mutex_;
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace ds4::tokenizer
