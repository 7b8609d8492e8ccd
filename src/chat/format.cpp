#include "chat/format.h"

#include "chat/deepseek4_format.h"
#include "chat/glm_format.h"
#include "chat/prompt_tokens.h"
#include "common/error.h"
#include "gguf/reader.h"
#include "tokenizer/tokenizer.h"

namespace ds4::chat {
namespace {

// The known formats, by general.architecture. A family whose format depends on its template
// checks key.chat_template in its factory. A second family is one more row.
struct Known {
    std::string_view architecture;
    std::unique_ptr<ChatFormat> (*make)(const FormatKey& key, const tokenizer::Tokenizer& tok);
};
const Known kKnown[] = {
    {"deepseek4", [](const FormatKey&, const tokenizer::Tokenizer& tok) { return make_deepseek4_format(tok); }},
    {"glm-dsa", [](const FormatKey&, const tokenizer::Tokenizer& tok) { return make_glm_format(tok); }},
};

std::string string_key(const gguf::File& f, const std::string& key) {
    const gguf::Value* v = f.find(key);
    if (!v) return {};
    const std::string* s = v->as_string();
    if (!s) fail("{}: metadata key '{}' has type {}, expected a string", f.path(), key, gguf::value_type_name(v->type));
    return *s;
}

}  // namespace

std::string ChatFormat::known_architectures() {
    std::string out;
    for (const Known& k : kKnown) {
        if (!out.empty()) out += ", ";
        out += '\'';
        out += k.architecture;
        out += '\'';
    }
    return out;
}

std::unique_ptr<ChatFormat> ChatFormat::select(const FormatKey& key, const tokenizer::Tokenizer& tok) {
    for (const Known& k : kKnown)
        if (k.architecture == key.architecture) return k.make(key, tok);
    fail("no chat format for architecture '{}' (this build has formats for: {})", key.architecture,
         known_architectures());
}

std::unique_ptr<ChatFormat> ChatFormat::from_gguf(const gguf::File& file, const tokenizer::Tokenizer& tok) {
    const FormatKey key{.architecture = string_key(file, "general.architecture"),
                        .chat_template = string_key(file, "tokenizer.chat_template")};
    if (key.architecture.empty()) fail("{}: metadata key 'general.architecture' missing", file.path());
    try {
        return select(key, tok);
    } catch (const Error& e) {
        fail("{}: {}", file.path(), e.what());
    }
}

int32_t ChatFormat::require_marker(std::string_view text) const {
    const int32_t id = tok_.find(text);
    if (id < 0)
        fail("the vocabulary has no token '{}', which the {} chat format needs "
             "(tokenizer.ggml.tokens)", text, name());
    const auto type = tok_.token_type(id);
    if (type != tokenizer::TokenType::Control && type != tokenizer::TokenType::UserDefined)
        fail("the token '{}' (id {}) is not a control or user-defined token "
             "(tokenizer.ggml.token_type), so rendered text would not tokenize it as one id; the {} "
             "chat format needs it as a marker", text, id, name());
    return id;
}

std::vector<int32_t> ChatFormat::tokenize(const RenderedPrompt& prompt) const {
    return tokenize_prompt(tok_, prompt);
}

}  // namespace ds4::chat
