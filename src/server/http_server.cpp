#include "server/http_server.h"

#include <chrono>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "chat/format.h"
#include "common/log.h"
#include "common/version.h"
#include "server/continuation.h"
#include "server/ids.h"
#include "tokenizer/tokenizer.h"

namespace ds4::server {
namespace {

using ojson = nlohmann::ordered_json;

using Clock = std::chrono::steady_clock;

bool anthropic_path(const std::string& path) { return path.rfind("/v1/messages", 0) == 0; }

// The API-shaped error body of §4.10 for `path`.
std::string error_body(const std::string& path, int status, const std::string& message,
                       const std::string& param, const std::string& code) {
    if (anthropic_path(path)) {
        const char* type = status == 401   ? "authentication_error"
                           : status == 403 ? "permission_error"
                           : status == 404 ? "not_found_error"
                           : status == 413 ? "request_too_large"
                           : status >= 500 ? "api_error"
                                           : "invalid_request_error";
        return anthropic_error_body(message, type);
    }
    const char* type = status >= 500 ? (status == 503 ? "server_error" : "http_error") : "invalid_request_error";
    return openai_error_body(message, type, param, code);
}

std::string lower(std::string s) {
    for (char& c : s)
        if (c >= 'A' && c <= 'Z') c = char(c - 'A' + 'a');
    return s;
}

// The media type of a Content-Type value, without parameters, in lower case.
std::string media_type(const std::string& content_type) {
    std::string t = lower(content_type.substr(0, content_type.find(';')));
    const size_t a = t.find_first_not_of(" \t"), b = t.find_last_not_of(" \t");
    return a == std::string::npos ? std::string() : t.substr(a, b - a + 1);
}

std::optional<Api> api_of(const std::string& path) {
    if (path == "/v1/chat/completions") return Api::Chat;
    if (path == "/v1/completions") return Api::Completions;
    if (path == "/v1/messages") return Api::Messages;
    if (path == "/v1/responses") return Api::Responses;
    return std::nullopt;
}

constexpr const char* kModelsPrefix = "/v1/models/";

bool get_route(const std::string& path) {
    if (path == "/" || path == "/health" || path == "/ready" || path == "/metrics" || path == "/v1/models") return true;
    return path.rfind(kModelsPrefix, 0) == 0 && path.size() > std::strlen(kModelsPrefix) &&
           path.find('/', std::strlen(kModelsPrefix)) == std::string::npos;
}

bool post_route(const std::string& path) { return api_of(path) || path == "/v1/messages/count_tokens"; }

// Constant-time comparison: the key must not leak through response timing.
bool same_secret(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b[i]);
    return diff == 0;
}

uint64_t fresh_seed() {
    uint64_t seed = 0;
    const std::string hex = random_hex(8);
    for (char c : hex) seed = seed << 4 | uint64_t(c <= '9' ? c - '0' : c - 'a' + 10);
    return seed;
}

// The prompt of request `r`: rendered, then for a forced tool choice the reply's opening
// appended (returned in `reply_prefix`). generate() and count_tokens() both use it, so the
// count is the prompt a generation evaluates.
chat::RenderedPrompt render_request(const chat::ChatFormat& format, const Request& r, chat::ThinkingMode mode,
                                    const chat::RenderOptions& options, std::string& reply_prefix) {
    chat::RenderedPrompt p = format.render(r.messages, options);
    if (r.tool_choice.forced() && !r.tools_json.empty())
        reply_prefix = format.append_tool_call_opening(p, mode != chat::ThinkingMode::Off, r.tool_choice.name);
    return p;
}

}  // namespace

HttpServer::HttpServer(model::Model& model, const tokenizer::Tokenizer& tok, ServerOptions options,
                       std::unique_ptr<ForcedOutputs> forced)
    : format_(chat::ChatFormat::from_gguf(model.file(), tok)),
      architecture_(model.info().architecture),
      options_(std::move(options)),
      ctx_(options_.scheduler.session.ctx),
      forced_(std::move(forced)),
      scheduler_(model, *format_, options_.scheduler, metrics_) {
    hosts_.bound = options_.host == "localhost" ? "127.0.0.1" : options_.host;
    hosts_.allowed = options_.allowed_hosts;
    if (!options_.trace_path.empty()) trace_ = std::make_unique<Trace>(options_.trace_path);
    if (options_.exact_tool_replay) {
        const chat::ChatFormat* format = format_.get();
        tool_memory_ = std::make_unique<ToolMemory>(
            ToolMemory::BlockParser([format](std::string_view block, const std::string& tools_json) {
                return format->parse(block, {.thinking = false, .tools = true, .tools_json = tools_json});
            }),
            options_.tool_memory_max_ids);
    }
    scheduler_.set_tool_memory(tool_memory_.get());
    if (options_.response_store_max > 0)
        responses_ = std::make_unique<ResponseStore>(options_.response_store_max, options_.response_store_bytes);
    ListenerOptions lo;
    lo.trace = trace_.get();
    lo.host = options_.host;
    lo.port = options_.port;
    lo.limits.max_body = options_.max_body;
    lo.header_timeout_s = options_.header_timeout_s;
    lo.body_timeout_s = options_.body_timeout_s;
    lo.max_connections = options_.max_connections;
    lo.max_client_connections = options_.max_client_connections;
    lo.max_handlers = std::max(1, options_.http_threads);
    HttpListener::Handlers h;
    h.on_headers = [this](const HttpRequest& r) { return on_headers(r); };
    h.on_request = [this](const HttpRequest& r) { return on_request(r); };
    h.on_thread = [this](const HttpRequest& r, HttpExchange& ex) { on_thread(r, ex); };
    h.error = [this](const std::string& path, int status, const std::string& message) {
        return error(path, status, message);
    };
    listener_ = std::make_unique<HttpListener>(std::move(lo), std::move(h));
}

HttpServer::~HttpServer() { stop(); }

chat::RenderOptions HttpServer::render_options(chat::ThinkingMode mode, const Request& r) const {
    chat::RenderOptions o;
    o.thinking = mode;
    o.context_size = ctx_;
    o.tools_json = r.tools_json;
    o.response_format_json = r.response_format_json;
    if (ToolMemory* memory = tool_memory_.get())
        o.exact_tool_block = [memory, tools = r.tools_json](const std::vector<chat::ToolCall>& calls) {
            return memory->replay(calls, tools);
        };
    return o;
}

// Exact replay across restarts (spec/PRODUCT.md §4.7): the tool-call ids of the history that
// the memory lacks are looked up in the disk cache's files.
void HttpServer::restore_tool_blocks(const Request& r) {
    kvcache::DiskCache* disk = scheduler_.disk();
    if (!tool_memory_ || !disk) return;
    std::vector<std::string> ids;
    for (const auto& m : r.messages)
        for (const auto& c : m.tool_calls)
            if (!c.id.empty()) ids.push_back(c.id);
    if (ids.empty()) return;
    std::vector<std::string> missing;
    const auto known = tool_memory_->entries_for(ids);
    for (const auto& id : ids) {
        bool have = false;
        for (const auto& k : known) have = have || k.first == id;
        if (!have) missing.push_back(id);
    }
    if (missing.empty()) return;
    for (const auto& [id, block] : disk->tool_blocks(missing)) tool_memory_->put(id, block);
}

int HttpServer::bind() { return listener_->bind(); }

void HttpServer::run() {
    if (!stopping_) listener_->run();
}

void HttpServer::drain(double timeout_s, const std::atomic<bool>* cut) {
    if (draining_.exchange(true)) return;
    metrics_.draining = 1;
    const auto t0 = Clock::now();
    auto left = [&] { return metrics_.in_flight.load(); };
    log::info("ds4-server: draining: {} request{} in flight; waiting up to {:g} s for them (signal again to stop now)",
              left(), left() == 1 ? "" : "s", timeout_s);
    while (left() > 0 && !(cut && *cut) &&
           std::chrono::duration<double>(Clock::now() - t0).count() < timeout_s)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const double took = std::chrono::duration<double>(Clock::now() - t0).count();
    if (left() == 0)
        log::info("ds4-server: drained in {:.1f} s: every request finished", took);
    else
        log::info("ds4-server: drain ended after {:.1f} s with {} request{} still in flight; they end now", took,
                  left(), left() == 1 ? "" : "s");
}

void HttpServer::stop() {
    if (!stopping_.exchange(true)) scheduler_.shutdown();  // jobs end with their last events queued
    // Their connections get up to 5 s to send those events (stopping at once could cut a
    // stream before its error event and [DONE]); then the rest are cut and the listener closes.
    listener_->stop(5.0);
}

HttpResponse HttpServer::json(std::string body, int status) const {
    HttpResponse r;
    r.status = status;
    r.body = std::move(body);
    if (options_.cors) {
        r.headers = {{"Access-Control-Allow-Origin", "*"},
                     {"Access-Control-Allow-Methods", "GET, POST, OPTIONS"},
                     {"Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, anthropic-version"}};
    }
    return r;
}

HttpResponse HttpServer::error(const std::string& path, int status, const std::string& message,
                               const std::string& param, const std::string& code) {
    ++metrics_.errors;
    return json(error_body(path, status, cap_text(message, 4 * kMaxEchoBytes), param, code), status);
}

std::string HttpServer::model_json(const std::string& id) const {
    const int64_t ctx = ctx_;
    return ojson{{"id", id},
                 {"object", "model"},
                 {"created", 1767225600},
                 {"owned_by", "ds4"},
                 {"name", !options_.model_name.empty() ? options_.model_name
                          : architecture_ == "glm-dsa"   ? std::string("GLM 5.2")
                                                         : std::string("DeepSeek V4 Flash")},
                 {"context_length", ctx},
                 {"top_provider", {{"context_length", ctx},
                                   {"max_completion_tokens", std::min(options_.default_max_tokens, ctx)},
                                   {"is_moderated", false}}},
                 {"supported_parameters", {"tools", "tool_choice", "max_tokens", "temperature", "top_p",
                                           "top_k", "min_p", "stop", "seed", "stream", "reasoning_effort"}}}
        .dump();
}

// The policy, before the body is read: a refused request costs no body bytes.
std::optional<HttpResponse> HttpServer::on_headers(const HttpRequest& req) {
    const std::string& path = req.path;
    // DNS rebinding: a page on attacker.example that resolves to 127.0.0.1 sends
    // "Host: attacker.example".
    if (!req.has_header("host")) {
        if (req.version >= 11) return error(path, 400, "missing Host header");
    } else if (const std::string& host = req.header("host"); !host_allowed(hosts_, host)) {
        return error(path, 403, fmt::format("Host '{}' is not allowed (this server answers localhost and its "
                                            "address; start it with --allowed-host NAME to add a name)",
                                            cap_text(host, 64)));
    }
    // A web page's own requests carry its Origin; they are served only with --cors.
    if (!options_.cors && req.has_header("origin") && !origin_allowed(hosts_, req.header("origin")))
        return error(path, 403, fmt::format("cross-origin request from '{}' refused (start the server "
                                            "with --cors to serve web pages)", cap_text(req.header("origin"), 64)));
    if (req.method == "OPTIONS") {
        HttpResponse r = json({}, 204);
        r.content_type.clear();
        return r;
    }
    if (!options_.api_key.empty() && path != "/" && path != "/health" && path != "/ready") {
        std::string given = req.header("x-api-key");
        const std::string& auth = req.header("authorization");
        if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
        if (!same_secret(given, options_.api_key)) return error(path, 401, "invalid or missing API key", {}, "invalid_api_key");
    }
    // HEAD answers like GET without the body (the listener drops it, HttpListener::respond).
    const bool get = (req.method == "GET" || req.method == "HEAD") && get_route(path);
    const bool post = req.method == "POST" && post_route(path);
    if (!get && !post) return error(path, 404, "unknown endpoint");
    if (stopping_ && path != "/health" && path != "/ready" && path != "/metrics")
        return error(path, 503, "server shutting down");
    if (draining_ && post) {
        HttpResponse r = error(path, 503, "server draining (it is about to stop); retry on another replica", {},
                               "draining");
        r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_s));
        return r;
    }
    // Bodies are JSON whatever their Content-Type says (clients that send none or text/plain
    // work), except from browsers: every browser sends Origin with every POST (the Fetch
    // standard), and a page may send a form or text/plain body across origins without a CORS
    // preflight. A request with an Origin must therefore be application/json, which no page
    // can send to another origin without a preflight (and the preflight gets no CORS answer
    // without --cors). A request without an Origin is not a web page's.
    if (post && req.has_header("origin") && media_type(req.header("content-type")) != "application/json")
        return error(path, 415, fmt::format("Content-Type must be application/json (got '{}')",
                                            cap_text(req.header("content-type"), 64)));
    return std::nullopt;
}

// Complete requests on the listener's front thread: only the cheap routes, which never wait.
std::optional<HttpResponse> HttpServer::on_request(const HttpRequest& req) {
    const std::string& path = req.path;
    if (path == "/health" || path == "/ready") {
        // A few atomics, no lock: cheap enough for a load balancer's checks every second.
        // Not ready (503) while draining or while a new request would be refused as queue_full.
        const int64_t slots = metrics_.slots.load(), busy = metrics_.active.load(),
                      waiting = metrics_.queue_depth.load();
        const bool full = waiting + busy >= slots + int64_t(options_.scheduler.max_queue);
        const char* status = draining_ || stopping_ ? "draining" : full ? "busy" : "ok";
        HttpResponse r = json(ojson{{"status", status},
                                    {"slots", {{"total", slots}, {"busy", busy}}},
                                    {"queue", {{"waiting", waiting}, {"max", options_.scheduler.max_queue}}}}
                                  .dump(),
                              std::string_view(status) == "ok" ? 200 : 503);
        if (r.status == 503) r.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_s));
        return r;
    }
    if (path == "/") {
        // Clients (and people) probe the root, often with HEAD, before using the API: name the
        // server and point at its routes. Needs no API key, like /health.
        return json(ojson{{"name", "ds4-server"}, {"version", ds4::version()},
                          {"routes", {"/v1/chat/completions", "/v1/completions", "/v1/messages", "/v1/responses",
                                      "/v1/models", "/health", "/ready", "/metrics"}}}
                        .dump());
    }
    if (path == "/metrics") {
        HttpResponse r = json(metrics_.prometheus() + scheduler_.prometheus());
        r.content_type = "text/plain; version=0.0.4";
        return r;
    }
    if (path == "/v1/models") {
        ojson data = ojson::array();
        for (const std::string& id : listed_models(architecture_)) data.push_back(ojson::parse(model_json(id)));
        return json(ojson{{"object", "list"}, {"data", data}}.dump());
    }
    if (req.method != "POST" && path.rfind(kModelsPrefix, 0) == 0) {
        const std::string id = path.substr(std::strlen(kModelsPrefix));
        if (known_model(id)) return json(model_json(id));
        return error(path, 404, "model '" + cap_text(id, 64) + "' not found", "model", "model_not_found");
    }
    return std::nullopt;
}

void HttpServer::on_thread(const HttpRequest& req, HttpExchange& ex) {
    if (req.path == "/v1/messages/count_tokens") return count_tokens(req, ex);
    if (const auto api = api_of(req.path)) return generate(*api, req, ex);
    ex.send(error(req.path, 404, "unknown endpoint"));
}

// Anthropic's token counting (Claude Code asks before long requests): the prompt the request
// would render, in tokens; nothing is queued.
void HttpServer::count_tokens(const HttpRequest& req, HttpExchange& ex) {
    try {
        Request r = parse_request(Api::Messages, req.body);
        expand_continuation(r, responses_.get());  // tool results alone count their conversation
        const chat::ThinkingMode mode = format_->effective_thinking(r.thinking, ctx_);
        std::string opening;
        const auto prompt = render_request(*format_, r, mode, render_options(mode, r), opening);
        const size_t n = format_->tokenize(prompt).size();
        ex.send(json(ojson{{"input_tokens", n}}.dump()));
    } catch (const RequestError& e) {
        ex.send(error(req.path, e.status, e.what()));
    } catch (const Error& e) {
        ex.send(error(req.path, 400, std::string("invalid request: ") + e.what()));
    }
}

HttpResponse HttpServer::prompt_too_long(Api api, const std::string& path, int64_t n, int64_t ctx) {
    const std::string msg = fmt::format("Prompt has {} tokens, but the configured context size is {} tokens", n, ctx);
    if (api == Api::Messages) return error(path, 400, msg);
    const char* param = api == Api::Responses ? "input" : api == Api::Completions ? "prompt" : "messages";
    HttpResponse res = error(path, 400, msg, param, "context_length_exceeded");
    ojson body = ojson::parse(res.body);
    body["error"]["n_prompt_tokens"] = n;
    body["error"]["n_ctx"] = ctx;
    res.body = body.dump();
    return res;
}

// The job of a generation request, or the error to answer: the request parsed (and expanded
// when it continues an earlier reply, server/continuation.h), rendered, tokenized and checked.
std::optional<HttpResponse> HttpServer::prepare(Api api, const HttpRequest& req, Job& job) {
    std::shared_ptr<const StoredTurn> continued;  // the earlier reply this request continues
    try {
        job.request = parse_request(api, req.body);
        continued = expand_continuation(job.request, responses_.get());
    } catch (const RequestError& e) {
        return error(req.path, e.status, e.what(), e.param, e.code);
    }
    // The affinity header names the session before any body field (docs/SERVER.md).
    if (const std::string& h = req.header("x-ds4-session"); !h.empty()) {
        job.request.session = session_key(h);
        job.request.session_source = "header";
    }
    if (!job.request.session.empty()) ++metrics_.session_requests;
    apply_sampling_defaults(job.request, format_->sampling_defaults());
    const Request& r = job.request;
    const int64_t ctx = ctx_;
    const chat::ThinkingMode mode = format_->effective_thinking(r.thinking, ctx);
    try {
        restore_tool_blocks(r);
        job.rendered = render_request(*format_, r, mode, render_options(mode, r), job.reply_prefix);
        job.prompt = continue_tokens(*format_, job.rendered, continued.get());
    } catch (const Error& e) {
        return error(req.path, 400, std::string("invalid request: ") + e.what());
    }
    const int64_t n = int64_t(job.prompt.size());
    if (n >= ctx) return prompt_too_long(api, req.path, n, ctx);
    job.thinking = mode != chat::ThinkingMode::Off;
    // Without a client seed every request must sample differently (§4.4).
    if (!r.seed_given) job.request.sampling.seed = fresh_seed();
    job.max_tokens = std::min(r.max_tokens.value_or(options_.default_max_tokens), ctx - n);
    if (forced_) job.forced = forced_->next();
    job.tool_memory = tool_memory_.get();
    job.responses = responses_.get();
    const ResponseMeta meta{.model = r.model.empty() ? listed_models(architecture_)[0] : r.model,
                            .seq = ++seq_,
                            .created = int64_t(std::time(nullptr))};
    job.writer = make_writer(r, meta);
    return std::nullopt;
}

void HttpServer::generate(Api api, const HttpRequest& req, HttpExchange& ex) {
    const auto started = Clock::now();
    ++metrics_.requests[int(api)];
    // Counted from here to the last byte: what a drain waits for.
    struct InFlight {
        std::atomic<int64_t>& n;
        explicit InFlight(std::atomic<int64_t>& c) : n(c) { ++n; }
        ~InFlight() { --n; }
    } in_flight(metrics_.in_flight);
    auto job = std::make_unique<Job>();
    if (auto refused = prepare(api, req, *job)) {
        ex.send(*refused);
        return;
    }
    const Request& r = job->request;
    auto channel = std::make_shared<Channel>();
    job->channel = channel;
    const bool stream = r.stream;
    const std::string session = r.session;  // the job (and r) belong to the scheduler after submit
    switch (scheduler_.submit(job)) {
        case Scheduler::Submit::Queued: break;
        case Scheduler::Submit::Stopping: ex.send(error(req.path, 503, "server shutting down")); return;
        case Scheduler::Submit::QueueFull: {
            HttpResponse res = error(req.path, 503,
                                     fmt::format("server busy: {} requests are waiting (--max-queue); retry later",
                                                 options_.scheduler.max_queue),
                                     {}, "queue_full");
            res.headers.emplace_back("Retry-After", std::to_string(options_.retry_after_s));
            ex.send(res);
            return;
        }
    }

    // While the job runs: a client that is gone cancels it (nobody would read the answer), and
    // so does --request-timeout (the job then ends with its error as usual).
    const bool limited = options_.request_timeout_s > 0;
    const auto deadline = started + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(options_.request_timeout_s));
    auto check_time = [&] {
        if (limited && !channel->cancel && Clock::now() >= deadline) {
            channel->timed_out = true;
            channel->cancel = true;
        }
    };
    constexpr auto kPoll = std::chrono::milliseconds(200);
    if (!stream) {
        std::string body;
        int status = 200;
        while (!channel->wait_all_for(body, status, kPoll)) {
            if (ex.client_gone()) {
                channel->cancel = true;
                return;
            }
            check_time();
        }
        if (status != 200) ++metrics_.errors;
        HttpResponse res = json(std::move(body), status);
        if (!session.empty()) res.headers.emplace_back("X-DS4-Session", session);
        ex.send(res);
        return;
    }
    HttpResponse head = json({});
    head.content_type = "text/event-stream";
    head.headers.emplace_back("Cache-Control", "no-cache");
    if (!session.empty()) head.headers.emplace_back("X-DS4-Session", session);
    if (!ex.start_stream(head)) {
        channel->cancel = true;
        return;
    }
    for (;;) {
        std::string bytes;
        const bool more = channel->pop(bytes, kPoll);
        if (!bytes.empty() && !ex.write(bytes)) {
            channel->cancel = true;  // the client is gone: stop generating for it
            return;
        }
        if (!more) {
            ex.finish_stream();
            return;
        }
        if (bytes.empty() && ex.client_gone()) {
            channel->cancel = true;
            return;
        }
        check_time();
    }
}

}  // namespace ds4::server
