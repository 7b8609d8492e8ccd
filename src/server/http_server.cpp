#include "server/http_server.h"

#include <httplib.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "chat/prompt_tokens.h"
#include "chat/render.h"
#include "server/ids.h"
#include "tokenizer/tokenizer.h"

namespace ds4::server {
namespace {

using ojson = nlohmann::ordered_json;


bool anthropic_path(const std::string& path) { return path.rfind("/v1/messages", 0) == 0; }

// The API-shaped error body of §4.10 for `path`.
void send_error(httplib::Response& res, const std::string& path, int status, const std::string& message,
                const std::string& param = {}, const std::string& code = {}) {
    res.status = status;
    if (anthropic_path(path)) {
        const char* type = status == 401   ? "authentication_error"
                           : status == 404 ? "not_found_error"
                           : status >= 500 ? "api_error"
                                           : "invalid_request_error";
        res.set_content(anthropic_error_body(message, type), "application/json");
    } else {
        const char* type = status >= 500 ? (status == 503 ? "server_error" : "http_error") : "invalid_request_error";
        res.set_content(openai_error_body(message, type, param, code), "application/json");
    }
}

// Constant-time comparison: the key must not leak through response timing.
bool same_secret(const std::string& a, const std::string& b) {
    if (a.size() != b.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= uint8_t(a[i]) ^ uint8_t(b[i]);
    return diff == 0;
}

chat::RenderOptions render_options(chat::ThinkingMode mode, int64_t ctx, const Request& r) {
    chat::RenderOptions o;
    o.thinking = mode;
    o.context_size = ctx;
    o.tools_json = r.tools_json;
    o.response_format_json = r.response_format_json;
    return o;
}

uint64_t fresh_seed() {
    uint64_t seed = 0;
    const std::string hex = random_hex(8);
    for (char c : hex) seed = seed << 4 | uint64_t(c <= '9' ? c - '0' : c - 'a' + 10);
    return seed;
}

}  // namespace

HttpServer::HttpServer(engine::Engine& engine, ServerOptions options, std::unique_ptr<ForcedOutputs> forced)
    : engine_(engine), options_(std::move(options)), forced_(std::move(forced)),
      scheduler_(engine, metrics_), http_(std::make_unique<httplib::Server>()) {
    const int threads = std::max(2, options_.http_threads);
    http_->new_task_queue = [threads] { return new httplib::ThreadPool(size_t(threads)); };
    http_->set_payload_max_length(options_.max_body);
    http_->set_keep_alive_max_count(1);  // every response says Connection: close (§4.1)
    http_->set_read_timeout(10, 0);
    http_->set_write_timeout(10, 0);
    routes();
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::bind() {
    const std::string host = options_.host == "localhost" ? "127.0.0.1" : options_.host;
    int port;
    if (options_.port == 0) {
        port = http_->bind_to_any_port(host);
    } else {
        port = http_->bind_to_port(host, options_.port) ? options_.port : -1;
    }
    if (port <= 0) fail("cannot listen on {}:{} (address in use or not local?)", host, options_.port);
    return port;
}

void HttpServer::run() {
    if (!stopping_) http_->listen_after_bind();
}

void HttpServer::stop() {
    if (stopping_.exchange(true)) return;
    scheduler_.shutdown();  // running and queued jobs end with their last events queued
    // Their connections finish writing those events (up to 5 s) before the sockets close:
    // stopping at once could cut a stream before its error event and [DONE].
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (open_streams_.load() > 0 && std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    http_->stop();
}

void HttpServer::routes() {
    auto& s = *http_;
    const bool cors = options_.cors;

    s.set_pre_routing_handler([this, cors](const httplib::Request& req, httplib::Response& res) {
        if (cors) {
            res.set_header("Access-Control-Allow-Origin", "*");
            res.set_header("Access-Control-Allow-Methods", "GET, POST, OPTIONS");
            res.set_header("Access-Control-Allow-Headers", "Authorization, Content-Type, x-api-key, anthropic-version");
        }
        if (req.method == "OPTIONS") {
            res.status = 204;
            return httplib::Server::HandlerResponse::Handled;
        }
        if (!options_.api_key.empty() && req.path != "/health") {
            std::string given = req.get_header_value("x-api-key");
            const std::string auth = req.get_header_value("Authorization");
            if (auth.rfind("Bearer ", 0) == 0) given = auth.substr(7);
            if (!same_secret(given, options_.api_key)) {
                ++metrics_.errors;
                send_error(res, req.path, 401, "invalid or missing API key", {}, "invalid_api_key");
                return httplib::Server::HandlerResponse::Handled;
            }
        }
        if (stopping_ && req.path != "/health" && req.path != "/metrics") {
            send_error(res, req.path, 503, "server shutting down");
            return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
    });

    s.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        ++metrics_.errors;
        if (res.status == 404) send_error(res, req.path, 404, "unknown endpoint");
        else if (res.status == 413) send_error(res, req.path, 400, "bad HTTP request: the body is too large");
        else if (res.status < 500) send_error(res, req.path, 400, "bad HTTP request");
        else send_error(res, req.path, res.status, "internal server error");
        return httplib::Server::HandlerResponse::Handled;
    }));

    s.set_exception_handler([](const httplib::Request& req, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "internal server error";
        try {
            if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
            what = e.what();
        } catch (...) {
        }
        send_error(res, req.path, 500, what);
    });

    s.Get("/health", [](const httplib::Request&, httplib::Response& res) {
        res.set_content(R"({"status":"ok"})", "application/json");
    });

    s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
        res.set_content(metrics_.prometheus(), "text/plain; version=0.0.4");
    });

    auto model_json = [this](const char* id) {
        const int64_t ctx = engine_.ctx();
        return ojson{{"id", id},
                     {"object", "model"},
                     {"created", 1767225600},
                     {"owned_by", "ds4"},
                     {"name", options_.model_name},
                     {"context_length", ctx},
                     {"top_provider", {{"context_length", ctx},
                                       {"max_completion_tokens", std::min(options_.default_max_tokens, ctx)},
                                       {"is_moderated", false}}},
                     {"supported_parameters", {"tools", "tool_choice", "max_tokens", "temperature", "top_p",
                                               "top_k", "min_p", "stop", "seed", "stream", "reasoning_effort"}}};
    };
    s.Get("/v1/models", [model_json](const httplib::Request&, httplib::Response& res) {
        ojson data = ojson::array();
        for (const char* id : kModelIds) data.push_back(model_json(id));
        res.set_content(ojson{{"object", "list"}, {"data", data}}.dump(), "application/json");
    });
    s.Get(R"(/v1/models/([^/]+))", [model_json](const httplib::Request& req, httplib::Response& res) {
        const std::string id = req.matches[1];
        for (const char* known : kModelIds)
            if (id == known) return res.set_content(model_json(known).dump(), "application/json");
        send_error(res, req.path, 404, "model '" + id + "' not found", "model", "model_not_found");
    });

    auto api_route = [this](Api api) {
        return [this, api](const httplib::Request& req, httplib::Response& res) {
            ++metrics_.requests[int(api)];
            auto job = std::make_unique<Job>();
            try {
                job->request = parse_request(api, req.body);
            } catch (const RequestError& e) {
                ++metrics_.errors;
                return send_error(res, req.path, e.status, e.what(), e.param, e.code);
            }
            const Request& r = job->request;
            const int64_t ctx = engine_.ctx();
            const chat::ThinkingMode mode = chat::effective_thinking(r.thinking, ctx);
            try {
                const auto prompt = chat::render_prompt(
                    r.messages, render_options(mode, ctx, r));
                job->prompt = chat::tokenize_prompt(engine_.tokenizer(), prompt);
            } catch (const Error& e) {
                ++metrics_.errors;
                return send_error(res, req.path, 400, std::string("invalid request: ") + e.what());
            }
            const int64_t n = int64_t(job->prompt.size());
            if (n >= ctx) {
                ++metrics_.errors;
                const std::string msg = fmt::format(
                    "Prompt has {} tokens, but the configured context size is {} tokens", n, ctx);
                if (api == Api::Messages) return send_error(res, req.path, 400, msg);
                const char* param = api == Api::Responses ? "input" : api == Api::Completions ? "prompt" : "messages";
                send_error(res, req.path, 400, msg, param, "context_length_exceeded");
                ojson body = ojson::parse(res.body);
                body["error"]["n_prompt_tokens"] = n;
                body["error"]["n_ctx"] = ctx;
                return res.set_content(body.dump(), "application/json");
            }
            job->thinking = mode != chat::ThinkingMode::Off;
            // Without a client seed every request must sample differently (§4.4).
            if (!r.seed_given) job->request.sampling.seed = fresh_seed();
            job->max_tokens = std::min(r.max_tokens.value_or(options_.default_max_tokens), ctx - n);
            if (forced_) job->forced = forced_->next();
            const ResponseMeta meta{.model = r.model.empty() ? kModelIds[0] : r.model,
                                    .seq = ++seq_,
                                    .created = int64_t(std::time(nullptr))};
            job->writer = make_writer(r, meta);
            auto channel = std::make_shared<Channel>();
            job->channel = channel;
            const bool stream = r.stream;
            if (!scheduler_.submit(job)) return send_error(res, req.path, 503, "server shutting down");

            if (!stream) {
                int status = 200;
                std::string body = channel->wait_all(status);
                if (status != 200) ++metrics_.errors;
                res.status = status;
                return res.set_content(body, "application/json");
            }
            res.set_header("Cache-Control", "no-cache");
            ++open_streams_;
            res.set_chunked_content_provider(
                "text/event-stream",
                [channel](size_t, httplib::DataSink& sink) {
                    std::string bytes;
                    const bool more = channel->pop(bytes, std::chrono::milliseconds(200));
                    if (!bytes.empty() && !sink.write(bytes.data(), bytes.size())) {
                        channel->cancel = true;  // the client is gone: stop generating for it
                        return false;
                    }
                    if (!more) {
                        sink.done();
                        return true;
                    }
                    if (bytes.empty() && !sink.is_writable()) {
                        channel->cancel = true;
                        return false;
                    }
                    return true;
                },
                [this, channel](bool success) {
                    if (!success || !channel->closed()) channel->cancel = true;
                    --open_streams_;
                });
        };
    };
    // Anthropic's token counting (Claude Code asks before long requests): the prompt the
    // request would render, in tokens; nothing is queued.
    s.Post("/v1/messages/count_tokens", [this](const httplib::Request& req, httplib::Response& res) {
        try {
            const Request r = parse_request(Api::Messages, req.body);
            const int64_t ctx = engine_.ctx();
            const auto prompt = chat::render_prompt(
                r.messages, render_options(chat::effective_thinking(r.thinking, ctx), ctx, r));
            const size_t n = chat::tokenize_prompt(engine_.tokenizer(), prompt).size();
            res.set_content(ojson{{"input_tokens", n}}.dump(), "application/json");
        } catch (const RequestError& e) {
            ++metrics_.errors;
            send_error(res, req.path, e.status, e.what());
        } catch (const Error& e) {
            ++metrics_.errors;
            send_error(res, req.path, 400, std::string("invalid request: ") + e.what());
        }
    });
    s.Post("/v1/chat/completions", api_route(Api::Chat));
    s.Post("/v1/completions", api_route(Api::Completions));
    s.Post("/v1/messages", api_route(Api::Messages));
    s.Post("/v1/responses", api_route(Api::Responses));
}

}  // namespace ds4::server
