// Seeded test strings for the tokenizer oracle comparisons (spec/TOKENIZER_CHAT.md §5.3): prose in
// several scripts, code, numbers of every length, whitespace runs, NBSP and other Unicode
// spaces, control characters, emoji sequences, combining marks and random Unicode fuzz.
//
// Every string is valid UTF-8 (the JS oracle works on UTF-16 strings) and contains no
// added-token text (both oracles match added tokens even in "plain" text).
//
// Code points are drawn only from ranges whose general categories are the same in Unicode
// 14 (PCRE2 10.42), llama.cpp's tables and Unicode 17 (node's ICU), or from ranges that are
// unassigned or private in all of them; §5.2 "Unicode version".
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "tokenizer/utf8.h"

namespace ds4::oracle::tokcorpus {

class Gen {
public:
    explicit Gen(uint64_t seed) : rng_(seed) {}
    uint32_t below(uint32_t n) { return uint32_t(rng_() % n); }  // not a distribution: portable
    uint32_t in(uint32_t lo, uint32_t hi) { return lo + below(hi - lo + 1); }
    bool chance(uint32_t percent) { return below(100) < percent; }
    template <class T>
    const T& pick(const std::vector<T>& v) { return v[below(uint32_t(v.size()))]; }

private:
    std::mt19937_64 rng_;
};

inline std::string cp(uint32_t c) {
    std::string s;
    tokenizer::append_utf8(s, c);
    return s;
}

// Ranges (inclusive) stable across Unicode 14..17 in the categories the regexes look at.
struct Range {
    uint32_t lo, hi;
};
inline const std::vector<Range>& fuzz_ranges() {
    static const std::vector<Range> r = {
        {0x0000, 0x007F},   {0x0080, 0x00FF},   {0x0100, 0x024F},   {0x0250, 0x036F},
        {0x0370, 0x03FF},   {0x0400, 0x052F},   {0x0531, 0x058A},   {0x0591, 0x05F4},
        {0x0600, 0x061C},   {0x061E, 0x06FF},   {0x0900, 0x097F},   {0x0980, 0x09FE},
        {0x0E01, 0x0E5B},   {0x10A0, 0x10FF},   {0x1100, 0x11FF},   {0x1E00, 0x1FFE},
        {0x2000, 0x2064},   {0x2070, 0x209C},   {0x20A0, 0x20BF},   {0x2100, 0x218B},
        {0x2190, 0x23FF},   {0x2460, 0x24FF},   {0x2500, 0x27BF},   {0x3000, 0x303F},
        {0x3041, 0x3096},   {0x3099, 0x30FF},   {0x3131, 0x318E},   {0x4E00, 0x9FEF},
        {0xAC00, 0xD7A3},   {0xE000, 0xF8FF},   {0xFB00, 0xFB06},   {0xFE10, 0xFE19},
        {0xFE30, 0xFE4F},   {0xFF01, 0xFFBE},   {0xFFF9, 0xFFFD},   {0x1D400, 0x1D7FF},
        {0x1F1E6, 0x1F1FF}, {0x1F300, 0x1F5FF}, {0x1F600, 0x1F64F}, {0x1F680, 0x1F6D2},
        {0x1F910, 0x1F93E}, {0x20000, 0x2A6D6}, {0x40000, 0x4FFFF}, {0xF0000, 0xF00FF},
    };
    return r;
}

inline uint32_t fuzz_cp(Gen& g) {
    const Range& r = g.pick(fuzz_ranges());
    // The 0x1D400 block has unassigned holes that stayed unassigned; all fine.
    return g.in(r.lo, r.hi);
}

// Unicode spaces and near-spaces the \s handling must get right.
inline const std::vector<std::string>& spaces() {
    static const std::vector<std::string> s = {
        " ", " ", " ", "  ", "\t", "\n", "\r\n", "\r", "\n\n", "\x0B", "\x0C", cp(0x85),
        cp(0xA0), cp(0x1680), cp(0x180E), cp(0x2000), cp(0x2003), cp(0x2009), cp(0x200A),
        cp(0x200B), cp(0x200D), cp(0x2028), cp(0x2029), cp(0x202F), cp(0x205F), cp(0x3000),
        cp(0xFEFF), "    ", "\t\t", " \n", "\n ", "   \n\n  ",
    };
    return s;
}

inline const std::vector<std::vector<std::string>>& word_lists() {
    static const std::vector<std::vector<std::string>> w = {
        // English with contractions
        {"the", "The", "I've", "don't", "we'll", "it's", "THEY'RE", "apples", "quickly", "brown",
         "fox", "jumps", "over", "lazy", "dog's", "o'clock", "naïve", "café", "résumé", "e.g.",
         "U.S.A.", "Mr.", "well-known", "state-of-the-art", "\"quoted\"", "(paren)", "[bracket]"},
        // Italian with guillemets and apostrophes
        {"Quel", "ramo", "del", "lago", "di", "Como", "«", "»", "«Ciao»", "perché", "città",
         "l'anima", "dell'uomo", "c’è", "più", "così", "Renzo", "Lucia", "dissero:", "«No!»",
         "virtù", "È", "Sì,", "—", "…", "“Addio”", "monti."},
        // Chinese with full-width punctuation
        {"我想", "在", "工作", "你好", "推理", "答案", "中文", "，", "。", "！", "？", "：",
         "「引号」", "《书名》", "～", "、", "（括号）", "龥", "鿦", "𠀀", "𪚥", "人工智能", "模型"},
        // Japanese kana, half-width katakana, Korean
        {"ひらがな", "カタカナ", "ｶﾀｶﾅ", "ー", "・", "日本語", "です。", "한국어", "안녕하세요",
         "ㄱㄴ", "テスト", "ﾃｽﾄ", "ゔ", "ヴ", "゛"},
        // Arabic, Hebrew, Persian digits
        {"مرحبا", "العالم", "بِسْمِ", "اللَّهِ", "؟", "،", "١٢٣", "٤٥٦٧", "۱۲۳", "שלום", "עוֹלָם",
         "ـ", "ﷲ"},
        // Devanagari, Bengali, Thai with combining marks
        {"नमस्ते", "हिन्दी", "क्षत्रिय", "१२३४", "।", "বাংলা", "ভাষা", "สวัสดี", "ภาษาไทย", "๑๒๓"},
        // Cyrillic, Greek, Armenian, Georgian
        {"Привет", "мир", "ёжик", "Ω", "αβγ", "Ελληνικά", "ῥῆμα", "Բարեւ", "ქართული"},
        // Combining marks (decomposed accents, stacked marks)
        {"e\xcc\x81", "a\xcc\x88", "n\xcc\x83o", "Z\xcd\x91\xcd\x8c\xcc\x9a", "i\xcc\x87",
         "\xcc\x81", "o\xcc\x88\xcc\x81", "x\xe2\x83\x9d"},
        // Emoji: ZWJ families, skin tones, flags, keycaps, VS16
        {"👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇮🇹", "🇯🇵", "1️⃣", "#️⃣", "❤️", "☺️", "🦙", "🦙.cpp",
         "😀😃", "🧑‍💻", "👁‍🗨", "✌🏿"},
        // Numbers and symbols
        {"½", "¾", "①", "⑳", "Ⅻ", "ⅷ", "²", "³", "₁₂", "０１２", "€", "$", "£100", "¥", "°C",
         "±", "∑", "√2", "π", "∞", "≤", "→", "©", "™", "§", "¶"},
    };
    return w;
}

inline std::string number(Gen& g) {
    static const std::vector<std::string> digit_sets[] = {
        {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"},
        {"٠", "١", "٢", "٣", "٤", "٥", "٦", "٧", "٨", "٩"},
        {"०", "१", "२", "३", "४", "५", "६", "७", "८", "९"},
        {"０", "１", "２", "３", "４", "５", "６", "７", "８", "９"},
        {"①", "②", "½", "Ⅻ", "²", "₃", "𝟙", "𝟚"},
    };
    const auto& set = digit_sets[g.chance(80) ? 0 : g.in(1, 4)];
    const uint32_t len = g.chance(70) ? g.in(1, 12) : g.in(13, 40);
    std::string s;
    for (uint32_t i = 0; i < len; ++i) {
        s += g.pick(set);
        if (g.chance(5)) s += g.pick(std::vector<std::string>{",", ".", " ", "_", "'", "e", "-"});
    }
    return s;
}

inline std::string prose(Gen& g) {
    const auto& lists = word_lists();
    std::string s;
    const uint32_t n = g.in(1, 25);
    const auto* words = &lists[g.below(uint32_t(lists.size()))];
    for (uint32_t i = 0; i < n; ++i) {
        if (g.chance(15)) words = &lists[g.below(uint32_t(lists.size()))];
        if (i) s += g.chance(80) ? " " : g.pick(spaces());
        if (g.chance(8)) s += number(g);
        else s += g.pick(*words);
        if (g.chance(12)) s += g.pick(std::vector<std::string>{".", ",", "!", "?", ";", ":", "…",
                                                               ".\n", ".»\n\n", ")", "\n"});
    }
    return s;
}

inline std::string code(Gen& g) {
    static const std::vector<std::string> lines = {
        "#include <stdio.h>", "int main(int argc, char **argv) {", "    return 0;", "}",
        "    for (int i = 0; i < n; ++i) x[i] += y[i] * 2;", "def f(x):", "    return x**2  # sq",
        "\tif (p == NULL) { errno = EINVAL; return -1; }", "{\"key\": [1, 2.5, null, true]}",
        "<div class=\"a\">&nbsp;&lt;b&gt;</div>", "$ ls -la | grep '.cpp' > out.txt 2>&1",
        "const auto it = m.find(k); // O(1)", "std::vector<int> v{1,2,3};", "x = 1_000_000",
        "SELECT * FROM t WHERE id=42;", "    snprintf(buf, sizeof(buf), \"%d\", value);",
        "fn main() -> Result<(), Box<dyn Error>> {", "  - name: build\n    run: make -j2",
        "a=$((b+1)); echo \"${a}\"", "if x != 0.5e-3 and y >= 0xFF:", "@decorator", "x #include",
        "s.net (bar 'it's ?d .h", "print(f\"{x!r:>10}\")", "/* comment */ /** doc */",
        "template <class T> T max(T a, T b);", "ptr->next->prev = ptr;", "i++; j--; k <<= 2;",
    };
    std::string s;
    const uint32_t n = g.in(1, 8);
    std::string indent;
    for (uint32_t i = 0; i < n; ++i) {
        if (g.chance(30)) indent = g.pick(std::vector<std::string>{"", "  ", "    ", "\t", "        "});
        s += indent + g.pick(lines);
        s += g.pick(std::vector<std::string>{"\n", "\n", "\n", "\r\n", "\n\n", ";\n", "\n    \n"});
    }
    return s;
}

inline std::string whitespace_mix(Gen& g) {
    std::string s;
    const uint32_t n = g.in(1, 12);
    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t k = g.in(0, 4);
        for (uint32_t j = 0; j < k; ++j) s += g.pick(spaces());
        s += g.chance(60) ? g.pick(word_lists()[g.below(3)]) : g.pick(std::vector<std::string>{
                                                                   "x", "1", "!", "«", "é", "中", "👍", "."});
    }
    if (g.chance(50)) s += g.pick(spaces());
    return s;
}

inline std::string controls(Gen& g) {
    std::string s;
    const uint32_t n = g.in(1, 20);
    for (uint32_t i = 0; i < n; ++i) {
        const uint32_t k = g.below(4);
        if (k == 0) s += char(g.in(0x00, 0x1F));
        else if (k == 1) s += cp(g.chance(50) ? 0x7F : g.in(0x80, 0x9F));
        else if (k == 2) s += g.pick(word_lists()[0]);
        else s += g.pick(spaces());
    }
    return s;
}

inline std::string fuzz(Gen& g) {
    std::string s;
    const uint32_t n = g.in(1, 40);
    for (uint32_t i = 0; i < n; ++i) s += cp(fuzz_cp(g));
    return s;
}

// Prefixes and near-misses of the marker strings: plain text, never a whole added token.
inline std::string marker_like(Gen& g) {
    static const std::vector<std::string> parts = {
        "<｜User", "｜>", "<｜Assistant", "<think", "think>", "</think", "｜DSML", "DSML｜", "<｜",
        "｜", "</", "<|EOT|", "<｜end▁of▁sentence", "▁", "<｜fim▁hole", "<tool_result>",
        "</tool_result>", "&lt;", "<｜｜>",
    };
    std::string s;
    const uint32_t n = g.in(1, 6);
    for (uint32_t i = 0; i < n; ++i) {
        s += g.pick(parts);
        if (g.chance(50)) s += g.pick(word_lists()[0]);
        if (g.chance(30)) s += " ";
    }
    return s;
}

inline std::string long_run(Gen& g) {
    static const std::vector<std::string> units = {" ", "\n", "\t", "a", "1", "中", "👍", ".", " a", "ab"};
    std::string s;
    const std::string& u = g.pick(units);
    const uint32_t n = g.in(20, 400);
    for (uint32_t i = 0; i < n; ++i) s += u;
    if (g.chance(50)) s += g.pick(std::vector<std::string>{"x", " x", "\n", "1", "!"});
    return s;
}

// `n` strings of all kinds, deterministic for a seed.
inline std::vector<std::string> plain_corpus(uint64_t seed, size_t n) {
    Gen g(seed);
    std::vector<std::string> out;
    out.reserve(n);
    for (size_t i = 0; i < n; ++i) {
        switch (i % 9) {
            case 0: case 1: out.push_back(prose(g)); break;
            case 2: out.push_back(code(g)); break;
            case 3: out.push_back(number(g)); break;
            case 4: out.push_back(whitespace_mix(g)); break;
            case 5: out.push_back(controls(g)); break;
            case 6: out.push_back(fuzz(g)); break;
            case 7: out.push_back(g.chance(70) ? marker_like(g) : long_run(g)); break;
            default: out.push_back(prose(g) + g.pick(spaces()) + code(g) + fuzz(g)); break;
        }
    }
    return out;
}

// Rendered-chat-like strings: text with added tokens (V3 control tokens and the V4 markers).
inline std::vector<std::string> special_corpus(uint64_t seed, size_t n) {
    static const std::vector<std::string> markers = {
        "<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
        "<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>", "<｜fim▁hole｜>",
        "<｜place▁holder▁no▁7｜>", "<|EOT|>", "<｜tool▁sep｜>",
    };
    Gen g(seed);
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
        std::string s;
        const uint32_t k = g.in(1, 8);
        for (uint32_t j = 0; j < k; ++j) {
            if (g.chance(60)) s += g.pick(markers);
            if (g.chance(70)) s += g.chance(50) ? prose(g) : marker_like(g);
        }
        out.push_back(s);
    }
    return out;
}

// The GLM 5.2 markers (chat/glm_markers.h and the rest of GLM's added tokens the tests lay out).
inline const std::vector<std::string>& glm_markers() {
    static const std::vector<std::string> m = {
        "<|endoftext|>", "[MASK]", "[gMASK]", "[sMASK]", "<sop>", "<eop>", "<|system|>", "<|user|>",
        "<|assistant|>", "<|observation|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
        "<tool_response>", "</tool_response>", "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>",
        "/nothink", "<|begin_of_box|>", "<|image|>",
    };
    return m;
}

// Rendered-GLM-chat-like strings: text with GLM's added tokens and near misses of them.
inline std::vector<std::string> glm_special_corpus(uint64_t seed, size_t n) {
    static const std::vector<std::string> parts = {
        "<|user", "|>", "<|", "[gMASK", "gMASK]", "<so", "<tool_", "call>", "</tool_call", "<arg_",
        "</arg_value", "_key>", "<think", "</", "/no", "think", "<|observation", "[MASK", "<<", ">>",
    };
    Gen g(seed);
    std::vector<std::string> out;
    for (size_t i = 0; i < n; ++i) {
        std::string s;
        const uint32_t k = g.in(1, 8);
        for (uint32_t j = 0; j < k; ++j) {
            if (g.chance(60)) s += g.pick(glm_markers());
            if (g.chance(35)) s += prose(g);
            if (g.chance(35)) {
                for (uint32_t q = g.in(1, 4); q > 0; --q) s += g.pick(parts) + (g.chance(40) ? g.pick(word_lists()[0]) : "");
            }
        }
        out.push_back(s);
    }
    return out;
}

}  // namespace ds4::oracle::tokcorpus
