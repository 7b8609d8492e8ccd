// Streaming detokenization: a token may end inside a UTF-8 character (emoji and CJK are often
// split across tokens), so bytes of an incomplete but so far well-formed character are held
// back until a later token completes them. Bytes that can never become a valid character are
// passed through as they are, so nothing is lost.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ds4::tokenizer {

class Tokenizer;

class StreamDecoder {
public:
    explicit StreamDecoder(const Tokenizer& tokenizer) : tok_(&tokenizer) {}

    // The bytes that can be shown after token `id` (possibly empty).
    std::string push(int32_t id);
    // Same for raw bytes (used by push and by callers that decode themselves).
    std::string push_bytes(std::string_view bytes);
    // Everything still held back (an incomplete character at the end of the stream).
    std::string flush();
    // Bytes currently held back.
    size_t pending() const { return held_.size(); }

private:
    const Tokenizer* tok_;
    std::string held_;
};

}  // namespace ds4::tokenizer
