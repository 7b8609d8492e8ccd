// One HTTP/1.x request read from a connection's bytes, with every limit enforced while
// reading (docs/SERVER.md "Limits"): the header section is bounded in bytes and fields, the
// body by max_body whether it comes with a Content-Length or chunked, and a POST/PUT/PATCH
// with neither is refused at once (411). Parsing is Boost.Beast's request parser; this class
// owns only the buffering and the limits, and touches no socket, so it can be fuzzed.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ds4::server {

struct HttpLimits {
    size_t max_header_bytes = 32768;  // request line + header fields
    size_t max_header_fields = 100;
    size_t max_body = size_t(64) << 20;
};

struct HttpRequest {
    std::string method;  // as sent, e.g. "POST"
    std::string target;  // request-target, e.g. "/v1/models?x=1"
    std::string path;    // target without the query
    int version = 11;    // 10 or 11
    std::vector<std::pair<std::string, std::string>> headers;  // names in lower case, in order
    std::string body;
    std::string peer;    // client address (the listener fills it in)

    // The first value of header `name` (lower case), or "" when absent.
    const std::string& header(std::string_view name) const;
    bool has_header(std::string_view name) const;
};

class HttpRequestReader {
public:
    enum class State {
        Headers,  // reading the header section
        Body,     // the header is complete (request() has it); reading the body
        Done,     // request() is complete; any further bytes are ignored
        Failed,   // error_status() / error_message() say why; stop reading
    };

    explicit HttpRequestReader(const HttpLimits& limits);
    ~HttpRequestReader();
    HttpRequestReader(const HttpRequestReader&) = delete;
    HttpRequestReader& operator=(const HttpRequestReader&) = delete;

    // Takes the next bytes received; returns the state afterwards.
    State feed(std::string_view bytes);
    // The client closed its end (an incomplete request fails with 400).
    State eof();
    State state() const { return state_; }

    // Valid from State::Body (header fields, empty body) and complete in State::Done.
    const HttpRequest& request() const { return request_; }
    HttpRequest& request() { return request_; }
    // The path of the request line as far as it was read (for shaping an error response
    // before the header is complete); "" when unknown.
    std::string path_hint() const;
    // The client sent "Expect: 100-continue" (it waits for an interim response).
    bool expects_continue() const { return expects_continue_; }

    int error_status() const { return error_status_; }  // 400, 411, 413, 431, 505
    const std::string& error_message() const { return error_message_; }

private:
    struct Parser;
    State fail(int status, std::string message);
    State header_done();
    void take_body();

    HttpLimits limits_;
    std::unique_ptr<Parser> parser_;
    std::string pending_;  // received bytes the parser has not consumed yet
    std::string head_;     // the first bytes seen (for path_hint)
    size_t header_bytes_ = 0;
    HttpRequest request_;
    State state_ = State::Headers;
    bool expects_continue_ = false;
    int error_status_ = 0;
    std::string error_message_;
};

}  // namespace ds4::server
