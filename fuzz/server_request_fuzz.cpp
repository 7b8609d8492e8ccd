// libFuzzer target for ds4-server's request reading (src/server/http_reader.h) and parsing
// (src/server/request.h): the first byte picks the API and a split size, the rest is the
// body. A body that starts like an HTTP request ("POST /...") is first read as raw HTTP, with
// small limits, both whole and in pieces: the two must agree, and a complete request's body
// (within the limit, chunked or not) goes on as the JSON body. Any body must either parse or
// throw RequestError -- never another exception, a crash or unbounded work. A parsed request
// is then rendered and run through its API writer with a few synthetic events, as the server
// would.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "chat/render.h"
#include "server/http_reader.h"
#include "server/request.h"
#include "server/writer.h"

namespace {

using ds4::server::HttpLimits;
using ds4::server::HttpRequestReader;

bool looks_like_http(std::string_view s) {
    size_t i = 0;
    while (i < s.size() && i < 8 && s[i] >= 'A' && s[i] <= 'Z') ++i;
    return i > 0 && i + 1 < s.size() && s[i] == ' ' && s[i + 1] == '/';
}

// Reads `bytes` as one request, in pieces of `piece` bytes (0: whole); then the client closes.
HttpRequestReader::State read_http(HttpRequestReader& r, std::string_view bytes, size_t piece) {
    if (piece == 0) piece = bytes.size() + 1;
    for (size_t at = 0; at < bytes.size(); at += piece) {
        const auto st = r.feed(bytes.substr(at, piece));
        if (st == HttpRequestReader::State::Done || st == HttpRequestReader::State::Failed) return st;
    }
    return r.eof();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace ds4::server;
    if (size == 0) return 0;
    Api api = Api(data[0] % 4);
    std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
    std::string http_body;
    if (looks_like_http(body)) {
        const HttpLimits limits{.max_header_bytes = 512, .max_header_fields = 16, .max_body = 1024};
        HttpRequestReader whole(limits), pieces(limits);
        const auto a = read_http(whole, body, 0);
        const auto b = read_http(pieces, body, 1 + data[0] / 4 % 13);
        // Accepted or refused alike however the bytes arrive (a request wrong in two ways may
        // be refused for either, depending on where the parser looks first).
        if (a != b) __builtin_trap();
        if (a == HttpRequestReader::State::Failed) {
            for (const int st : {whole.error_status(), pieces.error_status()})
                if (st != 400 && st != 411 && st != 413 && st != 431 && st != 505) __builtin_trap();
            (void)whole.path_hint();
            return 0;
        }
        if (a != HttpRequestReader::State::Done) __builtin_trap();  // after eof: done or failed
        const HttpRequest& req = whole.request();
        if (req.body != pieces.request().body || req.body.size() > limits.max_body) __builtin_trap();
        if (req.path == "/v1/messages") api = Api::Messages;
        else if (req.path == "/v1/responses") api = Api::Responses;
        else if (req.path == "/v1/completions") api = Api::Completions;
        http_body = req.body;
        body = http_body;
    }
    Request r;
    try {
        r = parse_request(api, body);
    } catch (const RequestError& e) {
        if (e.status < 400 || e.status > 499) __builtin_trap();
        // The message may quote client bytes; the error bodies must still be valid JSON.
        (void)openai_error_body(e.what(), "invalid_request_error", e.param, e.code);
        (void)anthropic_error_body(e.what(), "invalid_request_error");
        return 0;
    }
    // What parse_request produced must be renderable (the tools array is its own output).
    ds4::chat::RenderOptions o;
    o.thinking = r.thinking;
    o.context_size = 1 << 20;
    o.tools_json = r.tools_json;
    o.response_format_json = r.response_format_json;
    try {
        (void)ds4::chat::render_prompt(r.messages, o);
    } catch (const ds4::Error&) {
        __builtin_trap();
    }
    for (bool stream : {false, true}) {
        r.stream = stream;
        auto w = make_writer(r, {.model = r.model, .seq = 1, .created = 0});
        std::string out;
        using K = ds4::chat::OutputEvent::Kind;
        w->begin({}, out);
        w->event({K::Reasoning, r.model, 0}, out);
        w->event({K::Content, r.stop.empty() ? "x" : r.stop[0], 0}, out);
        w->event({K::ToolCallBegin, r.tools.empty() ? "f" : r.tools[0].name, 0}, out);
        w->event({K::ToolArguments, "{}", 0}, out);
        w->event({K::ToolCallEnd, "", 0}, out);
        FinishInfo f;
        f.parsed.content = r.model;
        w->finish(f, out);
    }
    return 0;
}
