// OpenAI Chat Completions and legacy Completions shapes (spec/PRODUCT.md §4.9).
#include <nlohmann/json.hpp>

#include "server/ids.h"
#include "server/writer.h"

namespace ds4::server {

using ojson = nlohmann::ordered_json;

const char* to_string(Finish f) {
    switch (f) {
        case Finish::Stop: return "stop";
        case Finish::Length: return "length";
        case Finish::ToolCalls: return "tool_calls";
        case Finish::Error: return "error";
    }
    return "?";
}

std::string sse(const std::string& data, const std::string& event) {
    std::string out;
    if (!event.empty()) out += "event: " + event + "\n";
    out += "data: " + data + "\n\n";
    return out;
}

std::string openai_error_body(const std::string& message, const std::string& type,
                              const std::string& param, const std::string& code) {
    ojson e{{"message", message}, {"type", type}};
    e["param"] = param.empty() ? ojson() : ojson(param);
    e["code"] = code.empty() ? ojson() : ojson(code);
    return ojson{{"error", e}}.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

std::string anthropic_error_body(const std::string& message, const std::string& type) {
    // Messages can quote client bytes (JSON parse errors): never let invalid UTF-8 throw here.
    return ojson{{"type", "error"}, {"error", {{"type", type}, {"message", message}}}}.dump(
        -1, ' ', false, ojson::error_handler_t::replace);
}

namespace {

// Invalid UTF-8 from a random model must not make dump() throw.
std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

ojson byte_values(const std::string& s) {
    ojson a = ojson::array();
    for (unsigned char c : s) a.push_back(int(c));
    return a;
}

// Chat's logprobs.content entry (its `token` may hold a partial UTF-8 sequence; `bytes` is exact).
ojson chat_logprob_entry(const TokenLogprobs& t) {
    ojson top = ojson::array();
    for (const auto& [token, lp] : t.top)
        top.push_back({{"token", token}, {"logprob", lp}, {"bytes", byte_values(token)}});
    return {{"token", t.token}, {"logprob", t.logprob}, {"bytes", byte_values(t.token)}, {"top_logprobs", top}};
}

// Legacy completions' parallel arrays.
struct CompletionLogprobs {
    ojson tokens = ojson::array(), token_logprobs = ojson::array(), top = ojson::array(),
          offsets = ojson::array();
    void add(const TokenLogprobs& t, int64_t offset) {
        tokens.push_back(t.token);
        token_logprobs.push_back(t.logprob);
        ojson alternatives = ojson::object();
        for (const auto& [token, lp] : t.top) alternatives[token] = lp;
        top.push_back(alternatives);
        offsets.push_back(offset);
    }
    ojson json() const {
        return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top}, {"text_offset", offsets}};
    }
};

ojson openai_usage(const Usage& u) {
    return {{"prompt_tokens", u.prompt},
            {"completion_tokens", u.completion},
            {"total_tokens", u.prompt + u.completion},
            {"prompt_tokens_details", {{"cached_tokens", u.cached}, {"cache_write_tokens", u.written}}},
            {"completion_tokens_details", {{"reasoning_tokens", u.reasoning}}}};
}

class ChatWriter : public ApiWriter {
public:
    ChatWriter(const Request& req, const ResponseMeta& meta)
        : stream_(req.stream), include_usage_(req.include_usage), logprobs_on_(req.logprobs >= 0), meta_(meta),
          id_("chatcmpl-" + std::to_string(meta.seq)) {}

    void begin(const Usage&, std::string& out) override {
        if (stream_) out += chunk({{"role", "assistant"}, {"content", ""}});
    }

    void event(const chat::OutputEvent& e, std::string& out) override {
        using K = chat::OutputEvent::Kind;
        if (e.kind == K::ToolCallBegin) ids_.push_back(openai_call_id());
        if (!stream_) return;
        switch (e.kind) {
            case K::Reasoning: out += chunk({{"reasoning_content", e.text}}); break;
            case K::Content: out += chunk({{"content", e.text}}); break;
            case K::ToolCallBegin:
                out += chunk({{"tool_calls", ojson::array({{{"index", e.index},
                                                            {"id", ids_.back()},
                                                            {"type", "function"},
                                                            {"function", {{"name", e.text}, {"arguments", ""}}}}})}});
                break;
            case K::ToolArguments:
                out += chunk({{"tool_calls",
                               ojson::array({{{"index", e.index}, {"function", {{"arguments", e.text}}}}})}});
                break;
            case K::ToolCallEnd: break;
        }
    }

    void logprobs(const TokenLogprobs& t, std::string& out) override {
        if (!stream_) {
            logprobs_.push_back(chat_logprob_entry(t));
            return;
        }
        out += chunk(ojson::object(), nullptr, {{"content", ojson::array({chat_logprob_entry(t)})}});
    }

    void finish(const FinishInfo& f, std::string& out) override {
        if (stream_) {
            out += chunk(ojson::object(), to_string(f.reason));
            if (include_usage_) {
                ojson j = base("chat.completion.chunk");
                j["choices"] = ojson::array();
                j["usage"] = openai_usage(f.usage);
                out += sse(dump(j));
            }
            out += sse("[DONE]");
            return;
        }
        ojson msg{{"role", "assistant"}};
        const auto& p = f.parsed;
        msg["content"] = p.content.empty() && !p.tool_calls.empty() ? ojson() : ojson(p.content);
        if (!p.reasoning.empty()) msg["reasoning_content"] = p.reasoning;
        if (!p.tool_calls.empty()) {
            ojson calls = ojson::array();
            for (size_t i = 0; i < p.tool_calls.size(); ++i)
                calls.push_back({{"id", i < ids_.size() ? ids_[i] : openai_call_id()},
                                 {"type", "function"},
                                 {"function", {{"name", p.tool_calls[i].name},
                                               {"arguments", p.tool_calls[i].arguments}}}});
            msg["tool_calls"] = calls;
        }
        ojson j = base("chat.completion");
        j["choices"] = ojson::array({{{"index", 0}, {"message", msg},
                                      {"logprobs", logprobs_on_ ? ojson{{"content", logprobs_}} : ojson()},
                                      {"finish_reason", to_string(f.reason)}}});
        j["usage"] = openai_usage(f.usage);
        out += dump(j);
    }

    std::vector<std::string> tool_ids() const override { return ids_; }

    void error_event(const std::string& message, std::string& out) override {
        out += sse(openai_error_body(message, "server_error"), "error");
    }

private:
    ojson base(const char* object) const {
        return {{"id", id_}, {"object", object}, {"created", meta_.created}, {"model", meta_.model},
                {"system_fingerprint", "ds4"}};
    }
    std::string chunk(ojson delta, const char* finish = nullptr, ojson logprobs = ojson()) const {
        ojson j = base("chat.completion.chunk");
        j["choices"] = ojson::array({{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", std::move(logprobs)},
                                      {"finish_reason", finish ? ojson(finish) : ojson()}}});
        return sse(dump(j));
    }

    bool stream_, include_usage_, logprobs_on_;
    ResponseMeta meta_;
    std::string id_;
    std::vector<std::string> ids_;
    ojson logprobs_ = ojson::array();  // non-streaming: every answer token's entry
};

class CompletionWriter : public ApiWriter {
public:
    CompletionWriter(const Request& req, const ResponseMeta& meta)
        : stream_(req.stream), include_usage_(req.include_usage), logprobs_on_(req.logprobs >= 0), meta_(meta),
          id_("cmpl-" + std::to_string(meta.seq)) {}

    void begin(const Usage&, std::string&) override {}

    void event(const chat::OutputEvent& e, std::string& out) override {
        // The completion text is the answer; reasoning and tool calls are not part of it.
        if (stream_ && e.kind == chat::OutputEvent::Kind::Content && !e.text.empty())
            out += sse(dump(with_choice(e.text, nullptr)));
    }

    void logprobs(const TokenLogprobs& t, std::string& out) override {
        const int64_t offset = text_bytes_;
        text_bytes_ += int64_t(t.token.size());
        if (!stream_) {
            logprobs_.add(t, offset);
            return;
        }
        CompletionLogprobs one;
        one.add(t, offset);
        ojson j = with_choice("", nullptr);
        j["choices"][0]["logprobs"] = one.json();
        out += sse(dump(j));
    }

    void finish(const FinishInfo& f, std::string& out) override {
        if (stream_) {
            out += sse(dump(with_choice("", to_string(f.reason))));
            if (include_usage_) {
                ojson j = base();
                j["choices"] = ojson::array();
                j["usage"] = openai_usage(f.usage);
                out += sse(dump(j));
            }
            out += sse("[DONE]");
            return;
        }
        ojson j = with_choice(f.parsed.content, to_string(f.reason));
        if (logprobs_on_) j["choices"][0]["logprobs"] = logprobs_.json();
        if (!f.parsed.reasoning.empty()) j["choices"][0]["reasoning_content"] = f.parsed.reasoning;
        j["usage"] = openai_usage(f.usage);
        out += dump(j);
    }

    void error_event(const std::string& message, std::string& out) override {
        out += sse(openai_error_body(message, "server_error"), "error");
    }

private:
    ojson base() const {
        return {{"id", id_}, {"object", "text_completion"}, {"created", meta_.created}, {"model", meta_.model}};
    }
    ojson with_choice(const std::string& text, const char* finish) const {
        ojson j = base();
        j["choices"] = ojson::array({{{"text", text}, {"index", 0}, {"logprobs", nullptr},
                                      {"finish_reason", finish ? ojson(finish) : ojson()}}});
        return j;
    }

    bool stream_, include_usage_, logprobs_on_;
    ResponseMeta meta_;
    std::string id_;
    CompletionLogprobs logprobs_;  // non-streaming: every answer token's
    int64_t text_bytes_ = 0;       // bytes of the answer tokens so far (text_offset)
};

}  // namespace

std::unique_ptr<ApiWriter> make_anthropic_writer(const Request& req, const ResponseMeta& meta);
std::unique_ptr<ApiWriter> make_responses_writer(const Request& req, const ResponseMeta& meta);

std::unique_ptr<ApiWriter> make_writer(const Request& req, const ResponseMeta& meta) {
    switch (req.api) {
        case Api::Chat: return std::make_unique<ChatWriter>(req, meta);
        case Api::Completions: return std::make_unique<CompletionWriter>(req, meta);
        case Api::Messages: return make_anthropic_writer(req, meta);
        case Api::Responses: return make_responses_writer(req, meta);
    }
    return nullptr;
}

}  // namespace ds4::server
