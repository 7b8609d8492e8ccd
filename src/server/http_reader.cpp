#include "server/http_reader.h"
#include "server/host_policy.h"

#include <fmt/format.h>

#include <algorithm>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstdint>

namespace ds4::server {

namespace http = boost::beast::http;

namespace {


const std::string kEmpty;

std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

}  // namespace

const std::string& HttpRequest::header(std::string_view name) const {
    for (const auto& [k, v] : headers)
        if (k == name) return v;
    return kEmpty;
}

bool HttpRequest::has_header(std::string_view name) const {
    for (const auto& h : headers)
        if (h.first == name) return true;
    return false;
}

struct HttpRequestReader::Parser {
    http::request_parser<http::string_body> p;
};

HttpRequestReader::HttpRequestReader(const HttpLimits& limits)
    : limits_(limits), parser_(std::make_unique<Parser>()) {
    auto& p = parser_->p;
    p.header_limit(std::uint32_t(std::min<size_t>(limits_.max_header_bytes, UINT32_MAX)));
    p.body_limit(std::uint64_t(limits_.max_body));  // counts chunked bodies chunk by chunk
    p.eager(false);  // stop at the end of the header, so its size is known exactly
}

HttpRequestReader::~HttpRequestReader() = default;

HttpRequestReader::State HttpRequestReader::fail(int status, std::string message) {
    state_ = State::Failed;
    error_status_ = status;
    error_message_ = std::move(message);
    pending_.clear();
    pending_.shrink_to_fit();
    return state_;
}

std::string HttpRequestReader::path_hint() const {
    if (!request_.path.empty()) return request_.path;
    // "METHOD SP target SP ..." as far as it arrived.
    const size_t sp = head_.find(' ');
    if (sp == std::string::npos) return {};
    const size_t end = head_.find_first_of(" ?\r\n", sp + 1);
    return head_.substr(sp + 1, end == std::string::npos ? std::string::npos : end - sp - 1);
}

HttpRequestReader::State HttpRequestReader::header_done() {
    const auto& m = parser_->p.get();
    size_t fields = 0;
    for (auto it = m.begin(); it != m.end(); ++it) ++fields;
    if (fields > limits_.max_header_fields)
        return fail(431, fmt::format("too many header fields ({}; the limit is {})", fields,
                                     limits_.max_header_fields));
    if (m.version() != 10 && m.version() != 11)
        return fail(505, "HTTP version not supported (HTTP/1.0 and HTTP/1.1 only)");
    request_.method = std::string(sv(m.method_string()));
    request_.target = std::string(sv(m.target()));
    request_.path = request_.target.substr(0, request_.target.find('?'));
    request_.version = int(m.version());
    request_.headers.reserve(fields);
    for (const auto& f : m) request_.headers.emplace_back(ascii_lower(sv(f.name_string())), std::string(sv(f.value())));
    const bool has_length = bool(parser_->p.content_length());
    const bool chunked = parser_->p.chunked();
    // Without a length or chunked framing a request has no body (RFC 9112 §6.3): for the
    // methods that carry one, the client most likely meant to send one, so say so at once
    // rather than time out waiting for it.
    if (!has_length && !chunked &&
        (request_.method == "POST" || request_.method == "PUT" || request_.method == "PATCH"))
        return fail(411, "Content-Length required (or Transfer-Encoding: chunked)");
    expects_continue_ = request_.version == 11 && ascii_lower(request_.header("expect")) == "100-continue" &&
                        (chunked || parser_->p.content_length().value_or(0) > 0);
    state_ = State::Body;
    return state_;
}

void HttpRequestReader::take_body() {
    request_.body = std::move(parser_->p.get().body());
}

HttpRequestReader::State HttpRequestReader::feed(std::string_view bytes) {
    if (state_ == State::Done || state_ == State::Failed) return state_;
    if (head_.size() < 512) head_.append(bytes.substr(0, 512 - head_.size()));
    pending_.append(bytes);
    auto& p = parser_->p;
    size_t pos = 0;  // consumed bytes of pending_ (erased once, at the end: no quadratic copying)
    auto consumed = [&] {
        pending_.erase(0, pos);
        return state_;
    };
    while (pos < pending_.size()) {
        // Beast bounds the header section, but not a chunk-size line or the trailer, so in the
        // body it sees at most max_header_bytes at a time: an element that does not fit is
        // refused, the same whether the bytes arrived at once or one by one.
        const size_t avail = pending_.size() - pos;
        const size_t window = state_ == State::Body ? std::min(avail, limits_.max_header_bytes) : avail;
        boost::system::error_code ec;
        const size_t used = p.put(boost::asio::const_buffer(pending_.data() + pos, window), ec);
        pos += used;
        if (state_ == State::Headers) header_bytes_ += used;
        if (ec == http::error::need_more) {
            if (state_ == State::Body && avail >= limits_.max_header_bytes)
                return fail(400, fmt::format("bad HTTP request: a chunk-size line or the trailer is longer than {} bytes",
                                             limits_.max_header_bytes));
            break;
        }
        // Beast applies its header limit to the start line and to the fields separately; the
        // limit here is on the whole header, however it arrives.
        if (ec == http::error::header_limit || (state_ == State::Headers && header_bytes_ > limits_.max_header_bytes))
            return fail(431, fmt::format("request header too large (the limit is {} bytes)",
                                         limits_.max_header_bytes));
        if (ec == http::error::body_limit)
            return fail(413, fmt::format("request body too large (the limit is {} bytes, --max-body)",
                                         limits_.max_body));
        if (ec) return fail(400, "bad HTTP request: " + ec.message());
        if (state_ == State::Headers && p.is_header_done()) {
            if (header_done() == State::Failed) return state_;
            p.eager(true);  // the body: as much as has arrived per call
        }
        if (p.is_done()) {
            take_body();
            pending_.clear();
            return state_ = State::Done;
        }
        if (used == 0) break;
    }
    return consumed();
}

HttpRequestReader::State HttpRequestReader::eof() {
    if (state_ == State::Done || state_ == State::Failed) return state_;
    boost::system::error_code ec;
    parser_->p.put_eof(ec);
    if (!ec && parser_->p.is_done()) {
        if (state_ == State::Headers && header_done() == State::Failed) return state_;
        take_body();
        return state_ = State::Done;
    }
    return fail(400, "bad HTTP request: the connection closed before the request was complete");
}

}  // namespace ds4::server
