// Anthropic Messages shapes (spec/PRODUCT.md §4.9): message_start, content blocks (thinking with a
// signature, text, tool_use with input_json_delta), message_delta, message_stop.
#include <nlohmann/json.hpp>

#include "server/ids.h"
#include "server/writer.h"

namespace ds4::server {
namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

const char* stop_reason(const FinishInfo& f) {
    switch (f.reason) {
        case Finish::ToolCalls: return "tool_use";
        case Finish::Length: return "max_tokens";
        default: return f.stop_sequence.empty() ? "end_turn" : "stop_sequence";
    }
}

// input_tokens + cache_read_input_tokens + cache_creation_input_tokens is the whole prompt, as
// with Anthropic. The live session is no cache a client asked to write (no cache_control
// breakpoints): every uncached token is input, reused ones are cache reads, and nothing is
// reported as a cache write (which clients would count a second time).
ojson usage_json(const Usage& u, int64_t output) {
    return {{"input_tokens", u.prompt - u.cached},
            {"output_tokens", output},
            {"cache_read_input_tokens", u.cached},
            {"cache_creation_input_tokens", 0}};
}

class AnthropicWriter : public ApiWriter {
public:
    AnthropicWriter(const Request& req, const ResponseMeta& meta)
        : stream_(req.stream), omit_thinking_(req.thinking_omitted), meta_(meta), id_("msg_" + random_hex(12)) {}

    void begin(const Usage& u, std::string& out) override {
        if (!stream_) return;
        ojson msg{{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", meta_.model},
                  {"content", ojson::array()}, {"stop_reason", nullptr}, {"stop_sequence", nullptr},
                  {"usage", usage_json(u, 0)}};
        emit(out, "message_start", {{"type", "message_start"}, {"message", msg}});
    }

    void event(const chat::OutputEvent& e, std::string& out) override {
        using K = chat::OutputEvent::Kind;
        switch (e.kind) {
            case K::Reasoning:
                saw_thinking_ = true;
                if (e.text.empty()) return;
                open(out, Block::Thinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
                if (!omit_thinking_) delta(out, {{"type", "thinking_delta"}, {"thinking", e.text}});
                break;
            case K::Content:
                if (e.text.empty()) return;
                saw_text_ = true;
                open(out, Block::Text, {{"type", "text"}, {"text", ""}});
                delta(out, {{"type", "text_delta"}, {"text", e.text}});
                break;
            case K::ToolCallBegin:
                ids_.push_back(anthropic_tool_id());
                close(out);
                open(out, Block::Tool, {{"type", "tool_use"}, {"id", ids_.back()}, {"name", e.text},
                                        {"input", ojson::object()}});
                break;
            case K::ToolArguments:
                if (block_ == Block::Tool) delta(out, {{"type", "input_json_delta"}, {"partial_json", e.text}});
                break;
            case K::ToolCallEnd: close(out); break;
        }
    }

    void finish(const FinishInfo& f, std::string& out) override {
        // Anthropic has no stop_reason for a failure: an error event ends the stream (the
        // SDKs raise it), and a non-streaming answer is an error body with an error status.
        if (f.reason == Finish::Error) {
            if (stream_) error_event(f.error, out);
            else out += anthropic_error_body(f.error, "api_error");
            return;
        }
        if (stream_) {
            close(out);
            if (saw_thinking_ && !saw_text_ && ids_.empty()) {
                open(out, Block::Text, {{"type", "text"}, {"text", ""}});
                close(out);
            }
            emit(out, "message_delta",
                 {{"type", "message_delta"},
                  {"delta", {{"stop_reason", stop_reason(f)},
                             {"stop_sequence", f.stop_sequence.empty() ? ojson() : ojson(f.stop_sequence)}}},
                  {"usage", usage_json(f.usage, f.usage.completion)}});
            emit(out, "message_stop", {{"type", "message_stop"}});
            return;
        }
        const auto& p = f.parsed;
        ojson content = ojson::array();
        if (!p.reasoning.empty())
            content.push_back({{"type", "thinking"}, {"thinking", omit_thinking_ ? "" : p.reasoning}, {"signature", id_}});
        if (!p.content.empty() || (content.size() == 1 && p.tool_calls.empty()) ||
            (content.empty() && p.tool_calls.empty()))
            content.push_back({{"type", "text"}, {"text", p.content}});
        for (size_t i = 0; i < p.tool_calls.size(); ++i) {
            ojson input = ojson::parse(p.tool_calls[i].arguments, nullptr, false);
            if (!input.is_object()) input = ojson{{"arguments", p.tool_calls[i].arguments}};
            content.push_back({{"type", "tool_use"},
                               {"id", i < ids_.size() ? ids_[i] : anthropic_tool_id()},
                               {"name", p.tool_calls[i].name},
                               {"input", input}});
        }
        ojson j{{"id", id_}, {"type", "message"}, {"role", "assistant"}, {"model", meta_.model},
                {"content", content}, {"stop_reason", stop_reason(f)},
                {"stop_sequence", f.stop_sequence.empty() ? ojson() : ojson(f.stop_sequence)},
                {"usage", usage_json(f.usage, f.usage.completion)}};
        out += dump(j);
    }

    int status(const FinishInfo& f) const override {
        return !stream_ && f.reason == Finish::Error ? f.error_status : 200;
    }

    std::vector<std::string> tool_ids() const override { return ids_; }

    void error_event(const std::string& message, std::string& out) override {
        emit(out, "error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}});
    }

private:
    enum class Block { None, Thinking, Text, Tool };

    void emit(std::string& out, const char* name, const ojson& j) {
        if (stream_) out += sse(dump(j), name);
    }
    void open(std::string& out, Block b, ojson start) {
        if (block_ == b && b != Block::Tool) return;
        close(out);
        block_ = b;
        emit(out, "content_block_start",
             {{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(start)}});
    }
    void delta(std::string& out, ojson d) {
        emit(out, "content_block_delta", {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(d)}});
    }
    void close(std::string& out) {
        if (block_ == Block::None) return;
        // The signature lets clients replay the thinking block; the message id is as good as any.
        if (block_ == Block::Thinking) delta(out, {{"type", "signature_delta"}, {"signature", id_}});
        emit(out, "content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
        block_ = Block::None;
        ++index_;
    }

    bool stream_;
    bool omit_thinking_;
    ResponseMeta meta_;
    std::string id_;
    Block block_ = Block::None;
    int index_ = 0;
    bool saw_thinking_ = false, saw_text_ = false;
    std::vector<std::string> ids_;
};

}  // namespace

std::unique_ptr<ApiWriter> make_anthropic_writer(const Request& req, const ResponseMeta& meta) {
    return std::make_unique<AnthropicWriter>(req, meta);
}

}  // namespace ds4::server
