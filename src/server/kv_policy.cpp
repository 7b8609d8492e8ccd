#include "server/kv_policy.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace ds4::server {

int64_t cold_store_point(std::span<const int32_t> prompt, const KvPolicy& p,
                         const chat::MarkerIds& markers) {
    const int64_t n = int64_t(prompt.size());
    if (p.cold_max_tokens <= 0 || n < p.min_tokens || n > p.cold_max_tokens) return 0;
    int64_t anchor = 0;
    for (int64_t i = 0; i < n; ++i) {
        if (prompt[size_t(i)] == markers.assistant) break;
        if (prompt[size_t(i)] == markers.user) anchor = i;
    }
    if (anchor >= p.min_tokens) return anchor;
    const int64_t align = std::max<int64_t>(1, p.boundary_align);
    const int64_t at = (n - p.boundary_trim) / align * align;
    return at >= p.min_tokens ? at : 0;
}

int64_t continued_step(const KvPolicy& p) {
    if (p.continued_interval <= 0) return 0;
    const int64_t align = std::max<int64_t>(1, p.boundary_align);
    return (p.continued_interval + align - 1) / align * align;
}

int64_t next_frontier(int64_t pos, const KvPolicy& p) {
    const int64_t step = continued_step(p);
    return step > 0 ? (pos / step + 1) * step : 0;
}

std::vector<ControlToken> control_tokens(const tokenizer::Tokenizer& tok, std::span<const int32_t> tokens,
                                         size_t max_bytes) {
    std::vector<ControlToken> out;
    size_t at = 0;
    for (int32_t id : tokens) {
        if (at >= max_bytes) break;
        if (tok.token_type(id) != tokenizer::TokenType::Normal && tok.token_type(id) != tokenizer::TokenType::Byte)
            out.push_back({at, id});
        at += tok.token_bytes(id).size();
    }
    return out;
}

chat::RenderedPrompt rendered_suffix(const chat::RenderedPrompt& p, size_t from) {
    chat::RenderedPrompt out;
    from = std::min(from, p.text.size());
    out.text = p.text.substr(from);
    for (const auto& s : p.untrusted) {
        const size_t end = s.offset + s.length;
        if (end <= from) continue;
        const size_t start = std::max(s.offset, from);
        out.untrusted.push_back({start - from, end - start});
    }
    return out;
}

}  // namespace ds4::server
