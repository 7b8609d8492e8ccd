#include "tokenizer/stream_decoder.h"

#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace ds4::tokenizer {

std::string StreamDecoder::push(int32_t id) { return push_bytes(tok_->token_bytes(id)); }

std::string StreamDecoder::push_bytes(std::string_view bytes) {
    held_.append(bytes);
    const size_t keep = utf8_incomplete_suffix(held_);
    std::string out = held_.substr(0, held_.size() - keep);
    held_.erase(0, held_.size() - keep);
    return out;
}

std::string StreamDecoder::flush() {
    std::string out;
    out.swap(held_);
    return out;
}

}  // namespace ds4::tokenizer
