// OpenAI Responses shapes (spec/PRODUCT.md §4.9): response.created, optional reasoning summary
// item, the message item, one item per function call, then completed / incomplete / failed
// carrying the whole output. Every event has a sequence_number right after its type.
#include <nlohmann/json.hpp>

#include "server/ids.h"
#include "server/writer.h"

namespace ds4::server {
namespace {

using ojson = nlohmann::ordered_json;

std::string dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

class ResponsesWriter : public ApiWriter {
public:
    ResponsesWriter(const Request& req, const ResponseMeta& meta)
        : stream_(req.stream), summary_(req.reasoning_summary), meta_(meta), tools_(req.tools),
          id_(responses_id("resp_")), previous_(req.previous_response_id), store_(req.store) {
        using M = ToolChoice::Mode;
        const auto& c = req.tool_choice;
        tool_choice_ = c.mode == M::None       ? ojson("none")
                       : c.mode == M::Required ? ojson("required")
                       : c.mode == M::Named    ? ojson{{"type", "function"}, {"name", wire_name(c.name)}}
                                               : ojson("auto");
    }

    void begin(const Usage&, std::string& out) override {
        emit(out, "response.created", {{"response", response("in_progress")}});
        emit(out, "response.in_progress", {{"response", response("in_progress")}});
    }

    void event(const chat::OutputEvent& e, std::string& out) override {
        using K = chat::OutputEvent::Kind;
        switch (e.kind) {
            case K::Reasoning:
                reasoning_text_ += e.text;
                if (!summary_ || e.text.empty()) return;
                open_reasoning(out);
                emit(out, "response.reasoning_summary_text.delta",
                     {{"item_id", item_id_}, {"output_index", index()}, {"summary_index", 0}, {"delta", e.text}});
                break;
            case K::Content:
                if (e.text.empty()) return;
                open_message(out);
                text_ += e.text;
                emit(out, "response.output_text.delta",
                     {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0},
                      {"delta", e.text}, {"logprobs", ojson::array()}});
                break;
            case K::ToolCallBegin: {
                close(out, true);
                kind_ = Item::Call;
                call_name_ = e.text;
                item_id_ = responses_id(custom_call() ? "ctc_" : "fc_");
                call_id_ = openai_call_id();
                ids_.push_back(call_id_);
                args_.clear();
                emit(out, "response.output_item.added",
                     {{"output_index", index()}, {"item", call_item("in_progress")}});
                break;
            }
            case K::ToolArguments: args_ += e.text; break;
            case K::ToolCallEnd: close(out, true); break;
        }
    }

    void finish(const FinishInfo& f, std::string& out) override {
        close(out, f.reasoning_complete);
        if (!has_message_ && !has_call_) {  // always answer with a message item
            open_message(out);
            close(out, true);
        }
        const char* status = f.reason == Finish::Length ? "incomplete"
                             : f.reason == Finish::Error ? "failed" : "completed";
        ojson r = response(status);
        r["output"] = output_;
        if (f.reason == Finish::Length) r["incomplete_details"] = {{"reason", "max_output_tokens"}};
        if (f.reason == Finish::Error) r["error"] = {{"code", "server_error"}, {"message", f.error}};
        const Usage& u = f.usage;
        r["usage"] = {{"input_tokens", u.prompt},
                      {"input_tokens_details", {{"cached_tokens", u.cached}, {"cache_write_tokens", u.written}}},
                      {"output_tokens", u.completion},
                      {"output_tokens_details", {{"reasoning_tokens", u.reasoning}}},
                      {"total_tokens", u.prompt + u.completion}};
        if (!stream_) {
            out += dump(r);
            return;
        }
        const char* type = f.reason == Finish::Length ? "response.incomplete"
                           : f.reason == Finish::Error ? "response.failed" : "response.completed";
        emit(out, type, {{"response", r}});
    }

    std::vector<std::string> tool_ids() const override { return ids_; }
    std::string response_id() const override { return id_; }

    void error_event(const std::string& message, std::string& out) override {
        ojson r = response("failed");
        r["error"] = {{"code", "server_error"}, {"message", message}};
        emit(out, "response.failed", {{"response", r}});
    }

private:
    enum class Item { None, Reasoning, Message, Call };

    // Streaming output, and the item list either way (the non-streaming body is built from it).
    void emit(std::string& out, const char* type, ojson fields) {
        if (!stream_) return;
        ojson j{{"type", type}, {"sequence_number", seq_++}};
        for (auto& [k, v] : fields.items()) j[k] = std::move(v);
        out += sse(dump(j), type);
    }
    int index() const { return int(output_.size()); }

    ojson response(const char* status) const {
        return {{"id", id_}, {"object", "response"}, {"created_at", meta_.created}, {"status", status},
                {"model", meta_.model}, {"output", ojson::array()}, {"parallel_tool_calls", true},
                {"tool_choice", tool_choice_}, {"tools", ojson::array()},
                {"previous_response_id", previous_.empty() ? ojson(nullptr) : ojson(previous_)}, {"store", store_}};
    }
    const ToolName* tool(const std::string& name) const {
        for (const auto& t : tools_)
            if (t.name == name) return &t;
        return nullptr;
    }
    std::string wire_name(const std::string& name) const {
        const ToolName* t = tool(name);
        return t ? t->wire_name : name;
    }
    bool custom_call() const {
        const ToolName* t = tool(call_name_);
        return t && t->custom;
    }
    // A custom tool's input: the "input" string of the arguments (else the arguments text).
    std::string custom_input() const {
        const ojson a = ojson::parse(args_, nullptr, false);
        if (a.is_object() && a.contains("input") && a["input"].is_string()) return a["input"].get<std::string>();
        return args_;
    }
    ojson call_item(const char* status) const {
        const ToolName* t = tool(call_name_);
        const std::string name = t ? t->wire_name : call_name_;
        if (t && t->custom)
            return {{"id", item_id_}, {"type", "custom_tool_call"}, {"status", status},
                    {"call_id", call_id_}, {"name", name}, {"input", args_.empty() ? "" : custom_input()}};
        ojson it{{"id", item_id_}, {"type", "function_call"}, {"status", status}, {"arguments", args_},
                 {"call_id", call_id_}, {"name", name}};
        if (t && !t->ns.empty()) it["namespace"] = t->ns;
        return it;
    }
    void open_reasoning(std::string& out) {
        if (kind_ == Item::Reasoning) return;
        close(out, true);
        kind_ = Item::Reasoning;
        item_id_ = responses_id("rs_");
        emit(out, "response.output_item.added",
             {{"output_index", index()},
              {"item", {{"id", item_id_}, {"type", "reasoning"}, {"status", "in_progress"}, {"summary", ojson::array()}}}});
        emit(out, "response.reasoning_summary_part.added",
             {{"item_id", item_id_}, {"output_index", index()}, {"summary_index", 0},
              {"part", {{"type", "summary_text"}, {"text", ""}}}});
    }
    void open_message(std::string& out) {
        if (kind_ == Item::Message) return;
        close(out, true);
        kind_ = Item::Message;
        item_id_ = responses_id("msg_");
        text_.clear();
        emit(out, "response.output_item.added",
             {{"output_index", index()},
              {"item", {{"id", item_id_}, {"type", "message"}, {"status", "in_progress"},
                        {"role", "assistant"}, {"content", ojson::array()}}}});
        emit(out, "response.content_part.added",
             {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0},
              {"part", {{"type", "output_text"}, {"text", ""}, {"annotations", ojson::array()}}}});
        has_message_ = true;
    }
    // Ends the open item; `complete` is false only for reasoning cut off before </think>.
    void close(std::string& out, bool complete) {
        switch (kind_) {
            case Item::None: return;
            case Item::Reasoning: {
                const std::string& text = reasoning_text_;
                emit(out, "response.reasoning_summary_text.done",
                     {{"item_id", item_id_}, {"output_index", index()}, {"summary_index", 0}, {"text", text}});
                ojson part{{"type", "summary_text"}, {"text", text}};
                emit(out, "response.reasoning_summary_part.done",
                     {{"item_id", item_id_}, {"output_index", index()}, {"summary_index", 0}, {"part", part}});
                ojson item{{"id", item_id_}, {"type", "reasoning"}, {"status", complete ? "completed" : "incomplete"},
                           {"summary", ojson::array({part})}};
                emit(out, "response.output_item.done", {{"output_index", index()}, {"item", item}});
                output_.push_back(item);
                break;
            }
            case Item::Message: {
                emit(out, "response.output_text.done",
                     {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0}, {"text", text_},
                      {"logprobs", ojson::array()}});
                ojson part{{"type", "output_text"}, {"text", text_}, {"annotations", ojson::array()}};
                emit(out, "response.content_part.done",
                     {{"item_id", item_id_}, {"output_index", index()}, {"content_index", 0}, {"part", part}});
                ojson item{{"id", item_id_}, {"type", "message"}, {"status", "completed"}, {"role", "assistant"},
                           {"content", ojson::array({part})}};
                emit(out, "response.output_item.done", {{"output_index", index()}, {"item", item}});
                output_.push_back(item);
                break;
            }
            case Item::Call: {
                if (custom_call()) {
                    const std::string input = custom_input();
                    emit(out, "response.custom_tool_call_input.delta",
                         {{"item_id", item_id_}, {"output_index", index()}, {"delta", input}});
                    emit(out, "response.custom_tool_call_input.done",
                         {{"item_id", item_id_}, {"output_index", index()}, {"input", input}});
                } else {
                    emit(out, "response.function_call_arguments.delta",
                         {{"item_id", item_id_}, {"output_index", index()}, {"delta", args_}});
                    emit(out, "response.function_call_arguments.done",
                         {{"item_id", item_id_}, {"output_index", index()}, {"arguments", args_}});
                }
                ojson item = call_item("completed");
                emit(out, "response.output_item.done", {{"output_index", index()}, {"item", item}});
                output_.push_back(item);
                has_call_ = true;
                break;
            }
        }
        kind_ = Item::None;
    }

    bool stream_, summary_;
    ResponseMeta meta_;
    std::vector<ToolName> tools_;
    std::string id_;
    std::string previous_;  // the request's previous_response_id (echoed)
    bool store_;            // the request's store (echoed)
    ojson tool_choice_;
    std::vector<std::string> ids_;
    int64_t seq_ = 0;
    Item kind_ = Item::None;
    std::string item_id_, call_id_, call_name_, args_, text_, reasoning_text_;
    ojson output_ = ojson::array();
    bool has_message_ = false, has_call_ = false;
};

}  // namespace

std::unique_ptr<ApiWriter> make_responses_writer(const Request& req, const ResponseMeta& meta) {
    return std::make_unique<ResponsesWriter>(req, meta);
}

}  // namespace ds4::server
