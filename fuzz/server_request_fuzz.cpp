// libFuzzer target for ds4-server's request parsing (src/server/request.h): the first byte
// picks the API, the rest is the body. Any body must either parse or throw RequestError --
// never another exception, a crash or unbounded work. A parsed request is then rendered and
// run through its API writer with a few synthetic events, as the server would.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat/render.h"
#include "server/request.h"
#include "server/writer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace ds4::server;
    if (size == 0) return 0;
    const Api api = Api(data[0] % 4);
    const std::string_view body(reinterpret_cast<const char*>(data + 1), size - 1);
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
