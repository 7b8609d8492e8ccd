// Small hand-made byte-level BPE vocabularies written to a GGUF, for the tokenizer and chat
// format tests: ids 0..255 are the byte symbols in byte order, then `markers`, then `extra`.
// BOS / EOS ids are written to tokenizer.ggml.{bos,eos}_token_id when their text is a token.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "chat/glm_markers.h"
#include "chat/markers.h"
#include "gguf/reader.h"
#include "gguf/writer.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ds4::test {

using tokenizer::TokenType;
using TokenList = std::vector<std::pair<std::string, TokenType>>;

// The seven DeepSeek V4 markers with the types llama.cpp's converter gives them.
inline TokenList v4_markers() {
    return {{std::string(chat::kBos), TokenType::Control},      {std::string(chat::kEos), TokenType::Control},
            {std::string(chat::kUser), TokenType::Control},     {std::string(chat::kAssistant), TokenType::Control},
            {std::string(chat::kThinkStart), TokenType::UserDefined},
            {std::string(chat::kThinkEnd), TokenType::UserDefined},
            {std::string(chat::kDsml), TokenType::UserDefined}};
}

// GLM 5.2's added tokens in their order (chat/glm_markers.h), all control tokens as in GLM's
// tokenizer.json; with <|endoftext|> as EOS and [gMASK] as BOS (glm_vocab()).
inline TokenList glm_markers() {
    namespace g = chat::glm;
    TokenList out;
    for (std::string_view m : {g::kEndOfText, std::string_view("[MASK]"), g::kGMask, std::string_view("[sMASK]"),
                               g::kSop, std::string_view("<eop>"), g::kSystem, g::kUser, g::kAssistant,
                               g::kObservation, g::kThinkStart, g::kThinkEnd, g::kToolCall, g::kToolCallEnd,
                               g::kToolResponse, g::kToolResponseEnd, g::kArgKey, g::kArgKeyEnd, g::kArgValue,
                               g::kArgValueEnd, std::string_view("/nothink")})
        out.push_back({std::string(m), TokenType::Control});
    return out;
}

struct VocabSpec {
    std::string model = "gpt2";
    std::string pre = "joyai-llm";
    std::string architecture;  // general.architecture; empty: not written
    TokenList markers = v4_markers();
    TokenList extra;
    std::vector<std::string> merges;
    std::vector<std::string> skip_markers;  // markers left out
    std::string bos = std::string(chat::kBos), eos = std::string(chat::kEos);  // texts of the ids
    bool drop_byte_A = false;
};

// A glm4-style vocabulary with GLM 5.2's markers (general.architecture "glm-dsa").
inline VocabSpec glm_vocab() {
    VocabSpec v;
    v.pre = "glm4";
    v.architecture = "glm-dsa";
    v.markers = glm_markers();
    v.bos = std::string(chat::glm::kGMask);
    v.eos = std::string(chat::glm::kEndOfText);
    return v;
}

// The byte-level alphabet symbol of byte `b`.
inline std::string sym(uint8_t b) {
    std::string s;
    tokenizer::append_utf8(s, tokenizer::byte_to_codepoint(b));
    return s;
}

// Writes a VocabSpec to a temporary GGUF (removed on destruction) and loads it.
class VocabFile {
public:
    VocabFile() = default;
    ~VocabFile() { std::filesystem::remove(path_); }
    VocabFile(const VocabFile&) = delete;
    VocabFile& operator=(const VocabFile&) = delete;

    // Writes `v` and returns the tokenizer of it (throws what Tokenizer::from_gguf throws).
    std::unique_ptr<tokenizer::Tokenizer> load(const VocabSpec& v) {
        write(v);
        return tokenizer::Tokenizer::from_gguf(*file_);
    }
    void write(const VocabSpec& v) {
        ids_.clear();
        std::vector<std::string> tokens;
        std::vector<int32_t> types;
        for (int b = 0; b < 256; ++b) {
            tokens.push_back(v.drop_byte_A && b == 'A' ? "[no A]" : sym(uint8_t(b)));
            types.push_back(int32_t(TokenType::Normal));
        }
        auto add = [&](const std::string& text, TokenType type) {
            ids_[text] = int32_t(tokens.size());
            tokens.push_back(text);
            types.push_back(int32_t(type));
        };
        for (const auto& [text, type] : v.markers)
            if (std::find(v.skip_markers.begin(), v.skip_markers.end(), text) == v.skip_markers.end())
                add(text, type);
        for (const auto& [text, type] : v.extra) add(text, type);
        file_.reset();
        {
            gguf::Writer w(path_);
            if (!v.architecture.empty()) w.set("general.architecture", gguf::Value::str(v.architecture));
            w.set("tokenizer.ggml.model", gguf::Value::str(v.model));
            w.set("tokenizer.ggml.pre", gguf::Value::str(v.pre));
            w.set("tokenizer.ggml.tokens", gguf::Value::array_str(tokens));
            w.set("tokenizer.ggml.token_type", gguf::Value::array_i32(types));
            w.set("tokenizer.ggml.merges", gguf::Value::array_str(v.merges));
            if (ids_.count(v.bos)) w.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(uint32_t(ids_[v.bos])));
            if (ids_.count(v.eos)) w.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(uint32_t(ids_[v.eos])));
            w.begin_data();
            w.finish();
        }
        file_ = gguf::File::open(path_);
    }

    int32_t id(const std::string& text) const { return ids_.at(text); }
    const gguf::File& file() const { return *file_; }

private:
    std::string path_ = (std::filesystem::temp_directory_path() /
                         ("ds4-vocab-" + std::to_string(::getpid()) + "-" +
                          std::to_string(reinterpret_cast<uintptr_t>(this)) + ".gguf")).string();
    std::unique_ptr<gguf::File> file_;
    std::map<std::string, int32_t> ids_;
};

}  // namespace ds4::test
