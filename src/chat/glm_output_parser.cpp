#include "chat/glm_output_parser.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <utility>

#include "chat/glm_markers.h"
#include "chat/json_text.h"
#include "chat/text_scan.h"

namespace ds4::chat::glm {
namespace {

using Kind = OutputEvent::Kind;
using ValueKind = OutputParser::ValueKind;
using ojson = nlohmann::ordered_json;
using scan::find_first;
using scan::is_space;
using scan::marker_partial_tail;
using scan::starts_with;
using scan::utf8_partial_tail;

// A tool name or argument key longer than this is not one the model meant: malformed.
constexpr size_t kMaxNameBytes = 4096;
constexpr std::array<std::string_view, 2> kAfterName = {kArgKey, kToolCallEnd};
constexpr std::array<std::string_view, 1> kValueClose = {kArgValueEnd};

std::string_view trim(std::string_view s) {
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

// JSON string body (no quotes) of raw text.
std::string json_escape_body(std::string_view s) {
    std::string q = json_quote(s);
    return q.substr(1, q.size() - 2);
}

std::string dump(const ojson& v) { return v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

// How a parameter's JSON schema types its value (glm_output_parser.h).
ValueKind classify(const ojson& s) {
    if (!s.is_object()) return ValueKind::Untyped;
    if (const auto t = s.find("type"); t != s.end()) {
        if (t->is_string()) return *t == "string" ? ValueKind::String : ValueKind::Json;
        if (t->is_array() && !t->empty()) {
            for (const auto& e : *t)
                if (e == "string") return ValueKind::String;
            return ValueKind::Json;
        }
    }
    if (const auto e = s.find("enum"); e != s.end() && e->is_array() && !e->empty()) {
        for (const auto& v : *e)
            if (v.is_string()) return ValueKind::String;
        return ValueKind::Json;
    }
    if (const auto c = s.find("const"); c != s.end()) return c->is_string() ? ValueKind::String : ValueKind::Json;
    for (const char* key : {"anyOf", "oneOf", "allOf"}) {
        const auto branches = s.find(key);
        if (branches == s.end() || !branches->is_array() || branches->empty()) continue;
        bool all_json = true;
        for (const auto& b : *branches) {
            const ValueKind k = classify(b);
            if (k == ValueKind::String) return ValueKind::String;
            all_json = all_json && k == ValueKind::Json;
        }
        return all_json ? ValueKind::Json : ValueKind::Untyped;
    }
    return ValueKind::Untyped;
}

// The JSON text of a complete non-string value (glm_output_parser.h).
std::string buffered_value(std::string_view raw, ValueKind kind) {
    if (kind == ValueKind::Json) {
        const std::string_view t = trim(raw);
        if (t.empty()) return "null";
        const ojson v = ojson::parse(t, nullptr, false);
        return v.is_discarded() ? json_quote(raw) : dump(v);  // mistyped by the model: keep it
    }
    const ojson v = ojson::parse(raw, nullptr, false);
    return !v.is_discarded() && !v.is_string() ? dump(v) : json_quote(raw);
}

bool has_angle(std::string_view s) { return s.find_first_of("<>") != std::string_view::npos; }

}  // namespace

OutputParser::Schemas OutputParser::schemas_of(const std::string& tools_json) {
    Schemas out;
    if (tools_json.empty()) return out;
    const ojson tools = ojson::parse(tools_json, nullptr, false);
    if (!tools.is_array()) return out;
    for (const auto& tool : tools) {
        if (!tool.is_object()) continue;
        const ojson& fn = tool.contains("function") ? tool.at("function") : tool;
        if (!fn.is_object() || !fn.contains("name") || !fn.at("name").is_string()) continue;
        auto& params = out[fn.at("name").get<std::string>()];
        const auto p = fn.find("parameters");
        if (p == fn.end() || !p->is_object() || !p->contains("properties") || !p->at("properties").is_object()) continue;
        for (const auto& [key, schema] : p->at("properties").items()) params[key] = classify(schema);
    }
    return out;
}

OutputParser::OutputParser(OutputParserOptions options)
    : thinking_(options.thinking),
      tools_(options.tools),
      schemas_(options.tools ? schemas_of(options.tools_json) : Schemas{}),
      state_(options.thinking ? State::ThinkStart : State::LeadingEnd) {}

OutputParser::ValueKind OutputParser::kind_of(const std::string& key) const {
    const auto tool = schemas_.find(name_);
    if (tool == schemas_.end()) return ValueKind::Untyped;
    const auto param = tool->second.find(key);
    return param == tool->second.end() ? ValueKind::Untyped : param->second;
}

void OutputParser::consume(size_t n, bool raw) {
    if (raw) raw_block_.append(buf_, 0, n);
    buf_.erase(0, n);
    consumed_ += int64_t(n);
}

void OutputParser::emit(std::vector<OutputEvent>& out, Kind kind, std::string text) {
    const bool text_kind = kind == Kind::Reasoning || kind == Kind::Content;
    if ((text_kind || kind == Kind::ToolArguments) && text.empty()) return;
    out.push_back(OutputEvent{kind, std::move(text), text_kind ? 0 : call_index_});
}

void OutputParser::feed(std::string_view chunk, std::vector<OutputEvent>& out) {
    buf_.append(chunk);
    while (step(false, out)) {
    }
}

void OutputParser::finish(std::vector<OutputEvent>& out) {
    while (step(true, out)) {
    }
    switch (state_) {
        case State::Between:  // the end of the output closes the calls
            block_closed_ = true;
            consume(buf_.size(), false);
            break;
        case State::Name:
        case State::Args:
        case State::Key:
        case State::ValueOpen:
        case State::StringValue:
        case State::BufferedValue:
            if (state_ == State::StringValue) {
                // The value runs to the end of the output: flush it, then close the call.
                emit(out, Kind::ToolArguments, json_escape_body(buf_));
                consume(buf_.size(), true);
            }
            unterminated_ = true;
            fail_block(out);
            malformed_ = false;
            break;
        default:
            consume(buf_.size(), false);
            break;
    }
}

void OutputParser::fail_block(std::vector<OutputEvent>& out) {
    malformed_ = true;
    if (in_call_) {
        // Close whatever is open so the streamed arguments stay one valid JSON object.
        if (state_ == State::StringValue) emit(out, Kind::ToolArguments, "\"");
        if (state_ == State::BufferedValue) emit(out, Kind::ToolArguments, "null");
        emit(out, Kind::ToolArguments, "}");
        emit(out, Kind::ToolCallEnd, {});
        in_call_ = false;
    }
    state_ = State::Ignore;
}

bool OutputParser::step(bool eof, std::vector<OutputEvent>& out) {
    switch (state_) {
        case State::ThinkStart:
        case State::Reasoning:
        case State::LeadingEnd:
        case State::Content:
            return step_text(eof, out);
        case State::Name:
        case State::Args:
        case State::Key:
        case State::ValueOpen:
            return step_call(eof, out);
        case State::StringValue:
        case State::BufferedValue:
            return step_value(eof, out);
        case State::Between:
            return step_between(eof);
        case State::Ignore:
            consume(buf_.size(), false);
            return false;
    }
    return false;
}

bool OutputParser::step_text(bool eof, std::vector<OutputEvent>& out) {
    const std::string_view b = buf_;
    if (state_ == State::ThinkStart || state_ == State::LeadingEnd) {
        // An optional leading marker: <think> in thinking mode, a stray </think> otherwise.
        const std::string_view marker = state_ == State::ThinkStart ? kThinkStart : kThinkEnd;
        if (starts_with(b, marker)) {
            consume(marker.size(), false);
        } else if (!eof && starts_with(marker, b)) {
            return false;
        }
        if (state_ == State::ThinkStart) {
            state_ = State::Reasoning;
        } else {
            state_ = State::Content;
            content_start_ = consumed_;
        }
        return true;
    }
    if (state_ == State::Reasoning) {
        const size_t end = b.find(kThinkEnd);
        if (end != std::string_view::npos) {
            emit(out, Kind::Reasoning, std::string(b.substr(0, end)));
            consume(end + kThinkEnd.size(), false);
            state_ = State::Content;
            content_start_ = consumed_;
            return true;
        }
        const std::array<std::string_view, 1> markers = {kThinkEnd};
        const size_t hold = eof ? 0 : std::max(marker_partial_tail(b, markers), utf8_partial_tail(b));
        emit(out, Kind::Reasoning, std::string(b.substr(0, b.size() - hold)));
        consume(b.size() - hold, false);
        return false;
    }
    // Content.
    if (const size_t at = tools_ ? b.find(kToolCall) : std::string_view::npos; at != std::string_view::npos) {
        size_t keep = at;
        while (keep > 0 && is_space(b[keep - 1])) --keep;  // the separator belongs to the block
        emit(out, Kind::Content, std::string(b.substr(0, keep)));
        consume(at, false);
        consume(kToolCall.size(), true);
        block_started_ = true;
        state_ = State::Name;
        return true;
    }
    size_t emit_end = b.size();
    if (!eof) {
        const std::array<std::string_view, 1> markers = {kToolCall};
        emit_end -= std::max(utf8_partial_tail(b), tools_ ? marker_partial_tail(b, markers) : 0);
        // Trailing whitespace may turn out to be the separator before a tool call.
        if (tools_)
            while (emit_end > 0 && is_space(b[emit_end - 1])) --emit_end;
    }
    emit(out, Kind::Content, std::string(b.substr(0, emit_end)));
    consume(emit_end, false);
    return false;
}

// Name, Args, Key and ValueOpen: the tags of a call around its values.
bool OutputParser::step_call(bool eof, std::vector<OutputEvent>& out) {
    if (state_ == State::Name || state_ == State::Key) {
        const auto end = state_ == State::Name ? find_first(buf_, kAfterName)
                                               : find_first(buf_, std::array<std::string_view, 1>{kArgKeyEnd});
        if (!end) {
            if (buf_.size() <= kMaxNameBytes) return false;  // at eof finish() reports it unterminated
            fail_block(out);
            return true;
        }
        const std::string text(trim(std::string_view(buf_).substr(0, end->first)));
        if (has_angle(text) || (state_ == State::Name && text.empty())) {
            fail_block(out);
            return true;
        }
        if (state_ == State::Name) {
            consume(end->first, true);  // the marker after the name is the Args state's
            name_ = text;
            ++call_index_;
            in_call_ = true;
            first_arg_ = true;
            emit(out, Kind::ToolCallBegin, name_);
            emit(out, Kind::ToolArguments, "{");
            state_ = State::Args;
        } else {
            consume(end->first + end->second, true);
            key_ = text;
            state_ = State::ValueOpen;
        }
        return true;
    }
    // Args and ValueOpen: whitespace, then the expected tag.
    size_t ws = 0;
    while (ws < buf_.size() && is_space(buf_[ws])) ++ws;
    consume(ws, true);
    if (buf_.empty()) return false;
    const std::string_view b = buf_;
    const std::array<std::string_view, 2> tags =
        state_ == State::Args ? kAfterName : std::array<std::string_view, 2>{kArgValue, kArgValue};
    for (std::string_view tag : tags) {
        if (!starts_with(b, tag)) continue;
        consume(tag.size(), true);
        if (tag == kArgKey) {
            state_ = State::Key;
        } else if (tag == kToolCallEnd) {
            emit(out, Kind::ToolArguments, "}");
            emit(out, Kind::ToolCallEnd, {});
            in_call_ = false;
            state_ = State::Between;
        } else {
            // The key goes out with its value's opening, so a call cut here still closes as JSON.
            std::string head = first_arg_ ? "" : ", ";
            first_arg_ = false;
            head += json_quote(key_);
            head += ": ";
            value_kind_ = kind_of(key_);
            if (value_kind_ == ValueKind::String) head += '"';
            emit(out, Kind::ToolArguments, std::move(head));
            state_ = value_kind_ == ValueKind::String ? State::StringValue : State::BufferedValue;
        }
        return true;
    }
    if (!eof && (starts_with(tags[0], b) || starts_with(tags[1], b))) return false;
    fail_block(out);
    return true;
}

bool OutputParser::step_value(bool eof, std::vector<OutputEvent>& out) {
    const std::string_view b = buf_;
    const size_t close = b.find(kArgValueEnd);
    if (close != std::string_view::npos) {
        emit(out, Kind::ToolArguments,
             state_ == State::StringValue ? json_escape_body(b.substr(0, close)) + "\""
                                          : buffered_value(b.substr(0, close), value_kind_));
        consume(close + kArgValueEnd.size(), true);
        state_ = State::Args;
        return true;
    }
    if (eof || state_ == State::BufferedValue) return false;  // finish() flushes and closes
    const size_t hold = std::max(marker_partial_tail(b, kValueClose), utf8_partial_tail(b));
    emit(out, Kind::ToolArguments, json_escape_body(b.substr(0, b.size() - hold)));
    consume(b.size() - hold, true);
    return false;
}

// After a call: another call (whitespace between them is part of the block), or anything else,
// which closes the block.
bool OutputParser::step_between(bool eof) {
    size_t ws = 0;
    while (ws < buf_.size() && is_space(buf_[ws])) ++ws;
    if (ws == buf_.size()) return false;
    const std::string_view rest = std::string_view(buf_).substr(ws);
    if (starts_with(rest, kToolCall)) {
        consume(ws + kToolCall.size(), true);
        state_ = State::Name;
        return true;
    }
    if (!eof && starts_with(kToolCall, rest)) return false;
    block_closed_ = true;
    state_ = State::Ignore;
    return true;
}

ParsedOutput parse_output(std::string_view text, OutputParserOptions options) {
    OutputParser parser(std::move(options));
    return parse_whole(parser, text);
}

}  // namespace ds4::chat::glm
