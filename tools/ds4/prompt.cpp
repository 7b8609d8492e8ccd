#include "prompt.h"

#include <algorithm>
#include <string_view>

#include "chat/message.h"
#include "common/error.h"
#include "tokenizer/tokenizer.h"

namespace ds4::cli {
namespace {

// Placeholders rendered in place of the untrusted texts so their positions can be found; the
// renderer copies message text verbatim, and these bytes never occur in its own text.
constexpr std::string_view kSystemSlot = "\x01\x02" "ds4-system-slot" "\x02\x01";
constexpr std::string_view kUserSlot = "\x01\x02" "ds4-user-slot" "\x02\x01";

struct Marker {
    size_t offset;  // in the final rendered string
    size_t length;
    int32_t id;
};

bool is_added(const tokenizer::Tokenizer& tok, int32_t id) {
    const auto t = tok.token_type(id);
    if (t == tokenizer::TokenType::Control || t == tokenizer::TokenType::UserDefined) return true;
    const auto& s = tok.special();
    return id == s.bos || id == s.eos || id == s.user || id == s.assistant || id == s.think ||
           id == s.think_end || id == s.dsml;
}

// Markers that Special::Match finds in the trusted piece `text` starting at `base`.
void find_markers(const tokenizer::Tokenizer& tok, std::string_view text, size_t base,
                  std::vector<Marker>& out) {
    size_t at = 0;
    for (int32_t id : tok.encode(text, tokenizer::Special::Match)) {
        const size_t n = tok.token_bytes(id).size();
        if (is_added(tok, id)) out.push_back({base + at, n, id});
        at += n;
    }
    if (at != text.size())
        fail("internal: tokens of the rendered prompt cover {} of {} bytes", at, text.size());
}

}  // namespace

std::vector<int32_t> one_turn_tokens(const tokenizer::Tokenizer& tok, const OneTurn& turn) {
    std::vector<chat::Message> messages;
    auto message = [](chat::Role role, std::string_view content) {
        chat::Message m;
        m.role = role;
        m.content = std::string(content);
        return m;
    };
    if (!turn.system.empty()) messages.push_back(message(chat::Role::System, kSystemSlot));
    messages.push_back(message(chat::Role::User, kUserSlot));
    chat::RenderOptions ro;
    ro.thinking = turn.thinking;
    ro.context_size = turn.context_size;
    const std::string templ = chat::render(messages, ro);

    // Substitute the real texts, remembering which byte ranges are trusted renderer text.
    std::string text;
    std::vector<Marker> markers;
    size_t from = 0;
    while (from <= templ.size()) {
        const size_t s = templ.find(kSystemSlot, from), u = templ.find(kUserSlot, from);
        const size_t slot = std::min(s, u);
        const std::string_view trusted = std::string_view(templ).substr(from, slot == std::string::npos ? std::string::npos : slot - from);
        find_markers(tok, trusted, text.size(), markers);
        text += trusted;
        if (slot == std::string::npos) break;
        text += slot == s ? turn.system : turn.user;
        from = slot + (slot == s ? kSystemSlot.size() : kUserSlot.size());
    }

    std::vector<int32_t> ids;
    size_t at = 0;
    for (const Marker& m : markers) {
        tok.encode_append(std::string_view(text).substr(at, m.offset - at), tokenizer::Special::Plain, ids);
        ids.push_back(m.id);
        at = m.offset + m.length;
    }
    tok.encode_append(std::string_view(text).substr(at), tokenizer::Special::Plain, ids);
    return ids;
}

}  // namespace ds4::cli
