// The tokenizer of a generated glm-dsa model: a small byte-level BPE vocabulary in the layout
// of GLM's (tokenizer.ggml.model "gpt2", pre "glm4"), so the file loads in llama.cpp and in our
// tokenizer and the chat markers tokenize as their ids.
//
//   ids 0..255               the 256 byte symbols, in byte order (NORMAL)
//   ids 256..                tokens made by the merges of a few common English words, as room
//                            allows below the special tokens (NORMAL)
//   ids n_vocab-60 ..        GLM's 36 added tokens in GLM's order (CONTROL): <|endoftext|>,
//       n_vocab-25           [MASK], [gMASK], [sMASK], <sop>, <eop>, <|system|>, <|user|>,
//                            <|assistant|>, <|observation|>, ..., <think>, </think>,
//                            <tool_call>, ..., </arg_value>, /nothink, ...
//   every other id           "[PAD<id>]" (UNUSED), as llama.cpp's converter fills holes
// With GLM 5's 154880 ids the added tokens sit at their published ids (<|endoftext|> 154820,
// [gMASK] 154822, <sop> 154824, <|user|> 154827, <think> 154841, </arg_value> 154850).
// Special ids as llama.cpp's GLM converter sets them: bos [gMASK], eos and unk and padding
// <|endoftext|>, eot <|user|>, eom <|observation|>; no BOS/EOS added by the tokenizer (the
// chat template writes [gMASK]<sop>).
#pragma once

#include <cstdint>
#include <string_view>

#include "vocab.h"

namespace ds4::gguf {
class Writer;
}

namespace ds4::gen {

// Ids between the last added token and the end of the vocabulary (GLM 5: 154880 - 154820).
inline constexpr uint32_t kGlmSpecialSlots = 60;
inline constexpr uint32_t kGlmVocabMinSize = 256 + kGlmSpecialSlots;

// The id of an added token (e.g. "<|user|>") in a glm4 vocabulary of n_vocab ids; throws
// ds4::Error for a text that is not one of GLM's added tokens.
uint32_t glm_special_id(uint32_t n_vocab, std::string_view text);

// The vocabulary above; throws ds4::Error when n_vocab < kGlmVocabMinSize.
Vocab glm4_vocab(uint32_t n_vocab);

// tokenizer.ggml.* keys of glm4_vocab(n_vocab).
void write_glm4_tokenizer(gguf::Writer& w, uint32_t n_vocab);

}  // namespace ds4::gen
