// ds4-server --trace FILE (docs/SERVER.md "Trace"): every request and its response appended to
// FILE as JSON lines, for debugging a client. Each line has "seq" (the request's number, from
// 1), "type" (request, response, stream, event, end), "time" (UTC, ISO 8601 with
// milliseconds) and "t" (seconds since the trace was opened). Requests carry method, target,
// peer, headers (Authorization, Proxy-Authorization, x-api-key and Cookie values replaced by
// "[redacted]") and body; a whole response carries status, headers and body; a streamed one a
// "stream" line (status, headers), one "event" line per SSE record as sent, and "end" ("complete": false when cut).
// Writes from all threads are serialized and flushed line by line.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http_reader.h"

namespace ds4::server {

class Trace {
public:
    using Headers = std::vector<std::pair<std::string, std::string>>;

    // Opens FILE for appending, creating it with mode 0600 (it holds prompts and answers);
    // throws ds4::Error when it cannot, or when FILE is a symlink or not a regular file.
    explicit Trace(const std::string& path);
    ~Trace();
    Trace(const Trace&) = delete;
    Trace& operator=(const Trace&) = delete;

    // A request as far as it was read (a refused connection has no method); returns its seq.
    uint64_t request(const HttpRequest& req);
    void response(uint64_t seq, int status, const Headers& headers, std::string_view body);
    void stream(uint64_t seq, int status, const Headers& headers);
    // Bytes of a streamed body: one "event" line per complete SSE record (a record ends with a
    // blank line); an incomplete tail is written as it is.
    void events(uint64_t seq, std::string_view bytes);
    // The end of a stream; `complete` false: it was cut (the client left, a write failed).
    void end(uint64_t seq, bool complete);

private:
    void write(std::string line);

    std::FILE* file_ = nullptr;
    std::mutex mutex_;
    uint64_t next_seq_ = 0;
    std::chrono::steady_clock::time_point opened_;
};

}  // namespace ds4::server
