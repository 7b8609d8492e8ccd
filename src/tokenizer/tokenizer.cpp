#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <queue>

#include "common/error.h"
#include "gguf/reader.h"
#include "tokenizer/byte_level.h"
#include "tokenizer/utf8.h"

namespace ds4::tokenizer {

namespace {

constexpr size_t kCacheMaxEntries = 1 << 16;
constexpr size_t kCacheMaxPieceBytes = 64;

bool is_integer_type(gguf::ValueType t) {
    using T = gguf::ValueType;
    return t == T::UINT8 || t == T::INT8 || t == T::UINT16 || t == T::INT16 || t == T::UINT32 ||
           t == T::INT32 || t == T::UINT64 || t == T::INT64;
}

// The array at `key`, of strings (want_strings) or of integers.
const gguf::Value& require_array(const gguf::File& f, const std::string& key, bool want_strings) {
    const gguf::Value* v = f.find(key);
    if (!v) fail("{}: metadata key '{}' missing", f.path(), key);
    if (!v->is_array())
        fail("{}: metadata key '{}' has type {}, expected an array", f.path(), key,
             gguf::value_type_name(v->type));
    const bool ok = want_strings ? v->elem_type == gguf::ValueType::STRING
                                 : is_integer_type(v->elem_type);
    if (!ok)
        fail("{}: metadata key '{}' is an array of {}, expected {}", f.path(), key,
             gguf::value_type_name(v->elem_type), want_strings ? "strings" : "integers");
    return *v;
}

// The byte-level spelling of `bytes` (each byte as its alphabet symbol, UTF-8 encoded).
std::string byte_level_text(std::string_view bytes) {
    std::string s;
    for (char c : bytes) append_utf8(s, byte_to_codepoint(uint8_t(c)));
    return s;
}

// Bytes an ordinary token stands for. A code point outside the byte alphabet cannot come
// from the converter; it is kept as its own UTF-8 rather than dropped.
std::string byte_level_decode(const std::string& text) {
    std::string out;
    for (size_t i = 0; i < text.size();) {
        const size_t n = utf8_char_length(text, i);
        if (n == 0) {
            out += text[i++];
            continue;
        }
        const int b = codepoint_to_byte(decode_utf8(text, i, n));
        if (b >= 0) out += char(b);
        else out.append(text, i, n);
        i += n;
    }
    return out;
}

}  // namespace

Tokenizer::Tokenizer(const std::string& pre) : pre_(pre) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::from_gguf(const gguf::File& f) {
    const std::string model = f.get_string("tokenizer.ggml.model");
    if (model != "gpt2")
        fail("{}: tokenizer.ggml.model is '{}', expected 'gpt2' (byte-level BPE); this file "
             "has no usable vocabulary", f.path(), model);
    const std::string pre = f.get_string("tokenizer.ggml.pre");
    if (!PreTokenizer::supports(pre))
        fail("{}: tokenizer.ggml.pre '{}' is not a pre-tokenizer this build knows (known: {})",
             f.path(), pre, PreTokenizer::known_names());
    std::unique_ptr<Tokenizer> t(new Tokenizer(pre));

    const gguf::Value& tokens = require_array(f, "tokenizer.ggml.tokens", true);
    const size_t n = tokens.elems.size();
    if (n == 0 || n > size_t(INT32_MAX))
        fail("{}: tokenizer.ggml.tokens has {} entries", f.path(), n);
    t->tokens_.reserve(n);
    for (const auto& e : tokens.elems) t->tokens_.push_back(std::get<std::string>(e));

    t->types_.assign(n, TokenType::Normal);
    if (f.find("tokenizer.ggml.token_type")) {
        const gguf::Value& types =
            require_array(f, "tokenizer.ggml.token_type", false);
        if (types.elems.size() != n)
            fail("{}: tokenizer.ggml.token_type has {} entries, tokenizer.ggml.tokens {}",
                 f.path(), types.elems.size(), n);
        for (size_t i = 0; i < n; ++i) {
            const auto v = types.elem_int(i);
            if (!v || *v < 1 || *v > 6)
                fail("{}: tokenizer.ggml.token_type[{}] is not a token type 1..6", f.path(), i);
            t->types_[i] = TokenType(*v);
        }
    }

    // The map holds views into tokens_, which never changes from here on.
    t->by_text_.reserve(n);
    for (size_t i = 0; i < n; ++i) t->by_text_.emplace(t->tokens_[i], int32_t(i));

    t->bytes_.resize(n);
    for (size_t i = 0; i < n; ++i) {
        switch (t->types_[i]) {
            case TokenType::Normal: t->bytes_[i] = byte_level_decode(t->tokens_[i]); break;
            case TokenType::Unused: break;
            default: t->bytes_[i] = t->tokens_[i]; break;
        }
    }

    for (int b = 0; b < 256; ++b) {
        const std::string sym = byte_level_text(std::string(1, char(b)));
        const int32_t id = t->find(sym);
        if (id < 0)
            fail("{}: tokenizer.ggml.tokens has no token for byte 0x{:02X} ('{}'), which "
                 "byte-level BPE needs", f.path(), b, sym);
        t->byte_id_[b] = id;
    }

    const gguf::Value& merges = require_array(f, "tokenizer.ggml.merges", true);
    t->n_merges_ = merges.elems.size();
    t->merges_.reserve(t->n_merges_);
    for (size_t r = 0; r < t->n_merges_; ++r) {
        const std::string& m = std::get<std::string>(merges.elems[r]);
        const size_t sp = m.find(' ', 1);  // a left part is never empty; tokens hold no space
        if (sp == std::string::npos || sp + 1 >= m.size())
            fail("{}: tokenizer.ggml.merges[{}] is '{}', expected 'left right'", f.path(), r, m);
        const int32_t left = t->find(std::string_view(m).substr(0, sp));
        const int32_t right = t->find(std::string_view(m).substr(sp + 1));
        // A merge of a pair that is not two tokens can never apply: ignore it.
        if (left < 0 || right < 0) continue;
        const std::string joined = m.substr(0, sp) + m.substr(sp + 1);
        const int32_t result = t->find(joined);
        if (result < 0)
            fail("{}: tokenizer.ggml.merges[{}] '{}' makes '{}', which is not a token", f.path(),
                 r, m, joined);
        t->merges_.emplace((uint64_t(uint32_t(left)) << 32) | uint32_t(right),
                           Merge{uint32_t(r), result});  // the first (lowest) rank wins
    }

    t->read_special(f);
    t->index_added();
    return t;
}

void Tokenizer::read_special(const gguf::File& f) {
    const std::pair<int32_t*, const char*> keys[] = {
        {&special_.bos, "tokenizer.ggml.bos_token_id"},
        {&special_.eos, "tokenizer.ggml.eos_token_id"},
        {&special_.pad, "tokenizer.ggml.padding_token_id"},
        {&special_.unk, "tokenizer.ggml.unknown_token_id"},
    };
    for (const auto& [slot, key] : keys) {
        const gguf::Value* v = f.find(key);
        if (!v) continue;
        const auto id = v->as_int();
        if (!id || *id < 0 || *id >= n_vocab())
            fail("{}: metadata key '{}' is not a token id in [0, {})", f.path(), key, n_vocab());
        *slot = int32_t(*id);
    }
}

// The added tokens Special::Match finds: every CONTROL and USER_DEFINED token.
void Tokenizer::index_added() {
    for (size_t i = 0; i < tokens_.size(); ++i) {
        const TokenType ty = types_[i];
        if ((ty == TokenType::Control || ty == TokenType::UserDefined) && !tokens_[i].empty())
            added_.emplace(tokens_[i], int32_t(i));
    }
    for (const auto& [text, id] : added_) {
        added_first_byte_[uint8_t(text[0])] = true;
        if (std::find(added_lengths_.begin(), added_lengths_.end(), text.size()) == added_lengths_.end())
            added_lengths_.push_back(text.size());
    }
    std::sort(added_lengths_.rbegin(), added_lengths_.rend());
}

int32_t Tokenizer::find(std::string_view text) const {
    const auto it = by_text_.find(text);
    return it == by_text_.end() ? -1 : it->second;
}

void Tokenizer::check_id(int32_t id) const {
    if (id < 0 || id >= n_vocab())
        fail("token id {} is outside the vocabulary [0, {})", id, n_vocab());
}

const std::string& Tokenizer::token_bytes(int32_t id) const {
    check_id(id);
    return bytes_[size_t(id)];
}

const std::string& Tokenizer::token_text(int32_t id) const {
    check_id(id);
    return tokens_[size_t(id)];
}

TokenType Tokenizer::token_type(int32_t id) const {
    check_id(id);
    return types_[size_t(id)];
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, Special special) const {
    std::vector<int32_t> out;
    encode_append(text, special, out);
    return out;
}

void Tokenizer::encode_append(std::string_view text, Special special,
                              std::vector<int32_t>& out) const {
    if (special == Special::Plain) {
        encode_plain(text, out);
        return;
    }
    // Leftmost match first; at one position the longest added token wins (HF semantics).
    size_t start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (!added_first_byte_[uint8_t(text[i])]) continue;
        for (size_t len : added_lengths_) {
            if (len > text.size() - i) continue;
            const auto it = added_.find(text.substr(i, len));
            if (it == added_.end()) continue;
            encode_plain(text.substr(start, i - start), out);
            out.push_back(it->second);
            start = i + len;
            i = start - 1;
            break;
        }
    }
    encode_plain(text.substr(start), out);
}

void Tokenizer::encode_plain(std::string_view text, std::vector<int32_t>& out) const {
    if (text.empty()) return;
    std::vector<std::string_view> pieces;
    pre_.split(text, pieces);
    for (std::string_view p : pieces) bpe_piece(p, out);
}

void Tokenizer::bpe_piece(std::string_view piece, std::vector<int32_t>& out) const {
    if (piece.size() == 1) {
        out.push_back(byte_id_[uint8_t(piece[0])]);
        return;
    }
    const bool cacheable = piece.size() <= kCacheMaxPieceBytes;
    if (cacheable) {
        std::lock_guard lock(cache_mutex_);
        const auto it = cache_.find(std::string(piece));
        if (it != cache_.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }

    // One symbol per byte in a linked list; a min-heap of candidate pairs ordered by (rank,
    // position) merges the lowest rank first and the leftmost on ties (§2.1 step 5). A heap
    // entry is stale when either symbol has changed since it was pushed: symbols only grow,
    // so their ids then differ.
    struct Sym {
        int32_t id;
        int32_t prev, next;
    };
    std::vector<Sym> sym(piece.size());
    for (size_t i = 0; i < piece.size(); ++i)
        sym[i] = {byte_id_[uint8_t(piece[i])], int32_t(i) - 1, int32_t(i) + 1};
    sym.back().next = -1;

    struct Cand {
        uint32_t rank;
        int32_t left;
        int32_t left_id, right_id, result;
        bool operator>(const Cand& o) const {
            return rank != o.rank ? rank > o.rank : left > o.left;
        }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push_pair = [&](int32_t left) {
        if (left < 0) return;
        const int32_t right = sym[size_t(left)].next;
        if (right < 0) return;
        const int32_t a = sym[size_t(left)].id, b = sym[size_t(right)].id;
        const auto it = merges_.find((uint64_t(uint32_t(a)) << 32) | uint32_t(b));
        if (it != merges_.end()) heap.push({it->second.rank, left, a, b, it->second.result});
    };
    for (size_t i = 0; i + 1 < piece.size(); ++i) push_pair(int32_t(i));

    while (!heap.empty()) {
        const Cand c = heap.top();
        heap.pop();
        Sym& l = sym[size_t(c.left)];
        if (l.id != c.left_id || l.next < 0 || sym[size_t(l.next)].id != c.right_id) continue;
        const int32_t r = l.next;
        l.id = c.result;
        l.next = sym[size_t(r)].next;
        if (l.next >= 0) sym[size_t(l.next)].prev = c.left;
        sym[size_t(r)].id = -1;  // dead
        push_pair(l.prev);
        push_pair(c.left);
    }

    const size_t first = out.size();
    for (int32_t i = 0; i >= 0; i = sym[size_t(i)].next) out.push_back(sym[size_t(i)].id);
    if (cacheable) {
        std::lock_guard lock(cache_mutex_);
        if (cache_.size() >= kCacheMaxEntries) cache_.clear();
        cache_.emplace(std::string(piece), std::vector<int32_t>(out.begin() + long(first), out.end()));
    }
}

std::string Tokenizer::decode(std::span<const int32_t> ids) const {
    std::string s;
    for (int32_t id : ids) s += token_bytes(id);
    return s;
}

}  // namespace ds4::tokenizer
