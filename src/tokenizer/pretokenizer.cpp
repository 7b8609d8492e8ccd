#include "tokenizer/pretokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <span>
#include <string_view>

#include "common/error.h"
#include "tokenizer/utf8.h"

namespace ds4::tokenizer {

namespace {

// Unicode White_Space (§2.1): what \s means in the reference regexes. Not U+180E, U+200B, U+FEFF.
#define DS4_WS "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}"

// "joyai-llm" = "deepseek-v3" (DeepSeek V3/V4): the three patterns of tokenizer.json's Split
// pre-tokenizers, in PCRE2 syntax.
const char* const kDeepseekV3Patterns[] = {
    "\\p{N}{1,3}",
    "[\\x{4E00}-\\x{9FA5}\\x{3040}-\\x{309F}\\x{30A0}-\\x{30FF}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+"
    "|[^\\r\\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\\r\\n]*"
    "|[" DS4_WS "]*[\\r\\n]+"
    "|[" DS4_WS "]+(?![^" DS4_WS "])"
    "|[" DS4_WS "]+",
};

// "glm4" = "chatglm-bpe": one GPT-4-style pattern (llama.cpp's LLAMA_VOCAB_PRE_TYPE_CHATGLM4,
// the llama3 pattern): case-insensitive English contractions, letters with one optional
// leading non-letter/non-digit, digits in threes, punctuation runs, newlines, spaces.
const char* const kGlm4Patterns[] = {
    "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+"
    "|\\p{N}{1,3}"
    "| ?[^" DS4_WS "\\p{L}\\p{N}]+[\\r\\n]*"
    "|[" DS4_WS "]*[\\r\\n]+"
    "|[" DS4_WS "]+(?![^" DS4_WS "])"
    "|[" DS4_WS "]+",
};

// The known pre-tokenizers: tokenizer.ggml.pre names -> regex stages. A new family's
// pre-tokenizer is one more row (its regexes checked against llama.cpp's llama-vocab.cpp).
constexpr std::string_view kDeepseekV3Names[] = {"joyai-llm", "deepseek-v3"};
constexpr std::string_view kGlm4Names[] = {"glm4", "chatglm-bpe"};
struct Known {
    std::span<const std::string_view> names;
    std::span<const char* const> patterns;
};
const Known kKnown[] = {
    {kDeepseekV3Names, kDeepseekV3Patterns},
    {kGlm4Names, kGlm4Patterns},
};

const Known* find_known(std::string_view name) {
    for (const Known& k : kKnown)
        for (std::string_view n : k.names)
            if (n == name) return &k;
    return nullptr;
}
#undef DS4_WS

std::string pcre2_message(int code) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof buf);
    return reinterpret_cast<const char*>(buf);
}

}  // namespace

struct PreTokenizer::Regex {
    pcre2_code* code = nullptr;
    ~Regex() { pcre2_code_free(code); }
};

bool PreTokenizer::supports(const std::string& name) { return find_known(name) != nullptr; }

std::string PreTokenizer::known_names() {
    std::string out;
    for (const Known& k : kKnown)
        for (std::string_view n : k.names) {
            if (!out.empty()) out += ", ";
            out += '\'';
            out += n;
            out += '\'';
        }
    return out;
}

PreTokenizer::PreTokenizer(const std::string& name) {
    const Known* known = find_known(name);
    if (!known)
        fail("tokenizer.ggml.pre '{}' is not a pre-tokenizer this build knows (known: {})", name,
             known_names());
    for (const char* pattern : known->patterns) {
        int err = 0;
        PCRE2_SIZE err_offset = 0;
        auto re = std::make_unique<Regex>();
        re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
        if (!re->code)
            fail("pre-tokenizer regex '{}' does not compile at offset {}: {}", pattern,
                 err_offset, pcre2_message(err));
        // JIT is an optimisation only: without it pcre2_match interprets the same pattern.
        pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
        stages_.push_back(std::move(re));
    }
}

PreTokenizer::~PreTokenizer() = default;

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
    // Per call, so split() is thread-safe; sized for the largest pattern.
    std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> md(
        pcre2_match_data_create(4, nullptr), &pcre2_match_data_free);
    if (!md) fail("pre-tokenizer: out of memory for PCRE2 match data");

    // Runs stage s on `piece` and recurses into the next stage for every match and gap.
    auto run = [&](auto&& self, size_t s, std::string_view piece) -> void {
        if (piece.empty()) return;
        if (s == stages_.size()) {
            pieces.push_back(piece);
            return;
        }
        const auto* subject = reinterpret_cast<PCRE2_SPTR>(piece.data());
        size_t pos = 0, gap = 0;
        while (pos < piece.size()) {
            const int rc = pcre2_match(stages_[s]->code, subject, piece.size(), pos,
                                       PCRE2_NO_UTF_CHECK, md.get(), nullptr);
            if (rc == PCRE2_ERROR_NOMATCH) break;
            if (rc < 0)
                fail("pre-tokenizer: regex {} failed on a piece of {} bytes: {}", s + 1,
                     piece.size(), pcre2_message(rc));
            const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
            const size_t b = ov[0], e = ov[1];
            if (e == b) {  // cannot happen with these patterns; step one character anyway
                pos = b + std::max<size_t>(1, utf8_char_length(piece, b));
                continue;
            }
            self(self, s + 1, piece.substr(gap, b - gap));
            self(self, s + 1, piece.substr(b, e - b));
            gap = pos = e;
        }
        self(self, s + 1, piece.substr(gap));
    };

    // Valid UTF-8 stretches go through the regexes; each stray byte is a piece of its own.
    size_t start = 0, i = 0;
    while (i < text.size()) {
        const auto c = static_cast<uint8_t>(text[i]);
        if (c < 0x80) {
            ++i;
            continue;
        }
        const size_t n = utf8_char_length(text, i);
        if (n) {
            i += n;
            continue;
        }
        run(run, 0, text.substr(start, i - start));
        pieces.push_back(text.substr(i, 1));
        start = ++i;
    }
    run(run, 0, text.substr(start));
}

}  // namespace ds4::tokenizer
