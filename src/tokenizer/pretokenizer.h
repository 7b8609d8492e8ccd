// The pre-tokenizer that tokenizer.ggml.pre names, from a table of known ones (pretokenizer.cpp):
//   "joyai-llm" = "deepseek-v3" (spec/TOKENIZER_CHAT.md §2.1 step 3): three regex splits with
//     "Isolated" behaviour run in sequence, each on every piece the previous one made:
//     R1 \p{N}{1,3}   R2 [一-龥぀-ゟ゠-ヿ]+   R3 the six-alternative GPT-style word pattern.
//   "glm4" = "chatglm-bpe": one split by the GPT-4-style pattern of llama.cpp's CHATGLM4.
// Real Unicode semantics through PCRE2 (UTF + UCP), with \s/\S spelled out as the Unicode
// White_Space property as HF's engine and llama.cpp use it (PCRE2's own \s also takes U+180E).
// A piece's regex never sees past the piece: (?!\S) at a piece end is true.
//
// Text need not be valid UTF-8: every byte outside a well-formed character becomes a piece of
// its own, and the regexes run on the valid stretches between them (byte-level BPE can encode
// any byte, so nothing is lost).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace ds4::tokenizer {

class PreTokenizer {
public:
    // `name` is tokenizer.ggml.pre. Throws ds4::Error naming it and the known names for a
    // name the table does not hold.
    explicit PreTokenizer(const std::string& name);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // Appends the pieces of `text`, in order, as views into it; they concatenate to `text`.
    // Thread-safe.
    void split(std::string_view text, std::vector<std::string_view>& pieces) const;

    static bool supports(const std::string& name);
    // The known names, quoted and comma-separated (for error messages).
    static std::string known_names();

private:
    struct Regex;
    std::vector<std::unique_ptr<Regex>> stages_;
};

}  // namespace ds4::tokenizer
