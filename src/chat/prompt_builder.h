// A prompt under construction, the same for every format's renderer: renderer text is trusted,
// text from the messages and tools is not (its marker look-alikes must stay plain text when
// tokenized, chat/prompt_tokens.h), so each piece is appended as one or the other.
#pragma once

#include <string_view>

#include "chat/conversation.h"

namespace ds4::chat {

struct PromptBuilder {
    RenderedPrompt p;
    void t(std::string_view s) { p.text += s; }  // trusted
    void u(std::string_view s) {                 // untrusted
        if (s.empty()) return;
        p.untrusted.push_back({p.text.size(), s.size()});
        p.text += s;
    }
    void append(const PromptBuilder& b) {
        for (const TextSpan& sp : b.p.untrusted) p.untrusted.push_back({p.text.size() + sp.offset, sp.length});
        p.text += b.p.text;
    }
};

}  // namespace ds4::chat
