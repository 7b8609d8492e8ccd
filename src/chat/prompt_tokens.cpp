#include "chat/prompt_tokens.h"

#include <string_view>

#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace ds4::chat {
namespace {

struct Marker {
    size_t offset;  // in the prompt text
    size_t length;
    int32_t id;
};

// The added tokens Special::Match produces (a format's markers are among them: ChatFormat
// checks that when it is made).
bool is_marker(const tokenizer::Tokenizer& tok, int32_t id) {
    const auto t = tok.token_type(id);
    return t == tokenizer::TokenType::Control || t == tokenizer::TokenType::UserDefined;
}

// Markers that Special::Match finds in the trusted piece `text` starting at `base`.
void find_markers(const tokenizer::Tokenizer& tok, std::string_view text, size_t base,
                  std::vector<Marker>& out) {
    size_t at = 0;
    for (int32_t id : tok.encode(text, tokenizer::Special::Match)) {
        const size_t n = tok.token_bytes(id).size();
        if (is_marker(tok, id)) out.push_back({base + at, n, id});
        at += n;
    }
    if (at != text.size())
        fail("internal: tokens of the rendered prompt cover {} of {} bytes", at, text.size());
}

}  // namespace

std::vector<int32_t> tokenize_prompt(const tokenizer::Tokenizer& tok, const RenderedPrompt& prompt) {
    const std::string_view text = prompt.text;
    std::vector<Marker> markers;
    size_t from = 0;
    for (const TextSpan& u : prompt.untrusted) {
        if (u.offset < from || u.offset + u.length > text.size())
            fail("internal: untrusted span [{}, +{}) out of order", u.offset, u.length);
        find_markers(tok, text.substr(from, u.offset - from), from, markers);
        from = u.offset + u.length;
    }
    find_markers(tok, text.substr(from), from, markers);

    std::vector<int32_t> ids;
    size_t at = 0;
    for (const Marker& m : markers) {
        tok.encode_append(text.substr(at, m.offset - at), tokenizer::Special::Plain, ids);
        ids.push_back(m.id);
        at = m.offset + m.length;
    }
    tok.encode_append(text.substr(at), tokenizer::Special::Plain, ids);
    return ids;
}

}  // namespace ds4::chat
