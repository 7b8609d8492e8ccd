// The "joyai-llm" pre-tokenizer (= "deepseek-v3"; spec/TOKENIZER_CHAT.md §2.1 step 3): three regex
// splits with "Isolated" behaviour run in sequence, each on every piece the previous one made:
//   R1 \p{N}{1,3}   R2 [一-龥぀-ゟ゠-ヿ]+   R3 the six-alternative GPT-style word pattern.
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
    // `name` is tokenizer.ggml.pre; "joyai-llm" and "deepseek-v3" (the same regexes) are
    // supported. Throws ds4::Error for any other name.
    explicit PreTokenizer(const std::string& name);
    ~PreTokenizer();
    PreTokenizer(const PreTokenizer&) = delete;
    PreTokenizer& operator=(const PreTokenizer&) = delete;

    // Appends the pieces of `text`, in order, as views into it; they concatenate to `text`.
    // Thread-safe.
    void split(std::string_view text, std::vector<std::string_view>& pieces) const;

    static bool supports(const std::string& name);

private:
    struct Regex;
    std::vector<std::unique_ptr<Regex>> stages_;
};

}  // namespace ds4::tokenizer
