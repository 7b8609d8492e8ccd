#include "glm_vocab.h"

#include <array>
#include <set>
#include <string>

#include "common/error.h"
#include "gguf/writer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace ds4::gen {

namespace {

// GLM's added tokens in id order from <|endoftext|> (GLM-4.5's and GLM 5's tokenizer.json).
constexpr std::array<std::string_view, 36> kGlmSpecial = {
    "<|endoftext|>",   "[MASK]",           "[gMASK]",
    "[sMASK]",         "<sop>",            "<eop>",
    "<|system|>",      "<|user|>",         "<|assistant|>",
    "<|observation|>", "<|begin_of_image|>", "<|end_of_image|>",
    "<|begin_of_video|>", "<|end_of_video|>", "<|begin_of_audio|>",
    "<|end_of_audio|>", "<|begin_of_transcription|>", "<|end_of_transcription|>",
    "<|code_prefix|>", "<|code_middle|>",  "<|code_suffix|>",
    "<think>",         "</think>",         "<tool_call>",
    "</tool_call>",    "<tool_response>",  "</tool_response>",
    "<arg_key>",       "</arg_key>",       "<arg_value>",
    "</arg_value>",    "/nothink",         "<|begin_of_box|>",
    "<|end_of_box|>",  "<|image|>",        "<|video|>",
};

// Words whose byte-pair merges give the vocabulary some multi-byte tokens (merged left to
// right, so every prefix is a token too).
constexpr std::string_view kWords[] = {
    " the", " and", " of", " to", " in", " is", " that", " it", " for", " with", "ing", "tion",
    " you", " on", " are", " this", " be", " as", " have", " not", "er", "ed", " The", " a",
    "\n\n", "  ", "    ", " {", "()", " =", " return", " def", " function", " model", " user",
    " tool", " call", " think", "00", "000", " 1", " 2",
};

std::string symbols(std::string_view bytes) {
    std::string s;
    for (unsigned char b : bytes) tokenizer::append_utf8(s, tokenizer::byte_to_codepoint(b));
    return s;
}

uint32_t special_base(uint32_t n_vocab) {
    if (n_vocab < kGlmVocabMinSize)
        fail("the glm4 vocabulary needs at least {} ids (256 bytes + {} for GLM's added tokens), got {}",
             kGlmVocabMinSize, kGlmSpecialSlots, n_vocab);
    return n_vocab - kGlmSpecialSlots;
}

}  // namespace

uint32_t glm_special_id(uint32_t n_vocab, std::string_view text) {
    for (size_t i = 0; i < kGlmSpecial.size(); ++i)
        if (kGlmSpecial[i] == text) return special_base(n_vocab) + uint32_t(i);
    fail("'{}' is not one of GLM's added tokens", text);
}

Vocab glm4_vocab(uint32_t n_vocab) {
    const uint32_t base = special_base(n_vocab);
    Vocab v;
    v.tokens.resize(n_vocab);
    v.types.assign(n_vocab, kUnused);
    for (uint32_t b = 0; b < 256; ++b) {
        v.tokens[b] = symbols(std::string_view(reinterpret_cast<const char*>(&b), 1));
        v.types[b] = kNormal;
    }
    std::set<std::string> known(v.tokens.begin(), v.tokens.begin() + 256);
    uint32_t next = 256;
    for (std::string_view w : kWords) {
        std::string cur = symbols(w.substr(0, 1));
        for (size_t i = 1; i < w.size() && next < base; ++i) {
            const std::string right = symbols(w.substr(i, 1));
            const std::string joined = cur + right;
            if (known.insert(joined).second) {
                v.merges.push_back(cur + " " + right);
                v.tokens[next] = joined;
                v.types[next++] = kNormal;
            }
            cur = joined;
        }
    }
    for (size_t i = 0; i < kGlmSpecial.size(); ++i) {
        v.tokens[base + i] = std::string(kGlmSpecial[i]);
        v.types[base + i] = kControl;
    }
    for (uint32_t id = 0; id < n_vocab; ++id)
        if (v.types[id] == kUnused) v.tokens[id] = "[PAD" + std::to_string(id) + "]";
    return v;
}

void write_glm4_tokenizer(gguf::Writer& w, uint32_t n_vocab) {
    using gguf::Value;
    const Vocab v = glm4_vocab(n_vocab);
    auto id = [&](std::string_view t) { return Value::u32(glm_special_id(n_vocab, t)); };
    w.set("tokenizer.ggml.model", Value::str("gpt2"));
    w.set("tokenizer.ggml.pre", Value::str("glm4"));
    w.set("tokenizer.ggml.tokens", Value::array_str(v.tokens));
    w.set("tokenizer.ggml.token_type", Value::array_i32(v.types));
    w.set("tokenizer.ggml.merges", Value::array_str(v.merges));
    w.set("tokenizer.ggml.bos_token_id", id("[gMASK]"));
    w.set("tokenizer.ggml.eos_token_id", id("<|endoftext|>"));
    w.set("tokenizer.ggml.eot_token_id", id("<|user|>"));
    w.set("tokenizer.ggml.eom_token_id", id("<|observation|>"));
    w.set("tokenizer.ggml.unknown_token_id", id("<|endoftext|>"));
    w.set("tokenizer.ggml.padding_token_id", id("<|endoftext|>"));
    w.set("tokenizer.ggml.add_bos_token", Value::boolean(false));
    w.set("tokenizer.ggml.add_eos_token", Value::boolean(false));
}

}  // namespace ds4::gen
