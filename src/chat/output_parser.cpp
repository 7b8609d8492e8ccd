#include "chat/output_parser.h"

#include "chat/json_text.h"
#include "chat/markers.h"
#include "chat/text_scan.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

namespace ds4::chat {

namespace {

using Kind = OutputEvent::Kind;

// Every DSML tag may be written in the official form, the degraded form with the first bar
// missing, or as plain XML (spec/TOKENIZER_CHAT.md §4.2).
constexpr std::array<std::string_view, 3> kBlockOpen = {"<｜DSML｜tool_calls>", "<DSML｜tool_calls>",
                                                        "<tool_calls>"};
constexpr std::array<std::string_view, 3> kParamClose = {"</｜DSML｜parameter>", "</DSML｜parameter>",
                                                         "</parameter>"};
constexpr std::array<std::string_view, 3> kParamOpen = {"<｜DSML｜parameter ", "<DSML｜parameter ",
                                                        "<parameter "};
constexpr std::array<std::string_view, 2> kTagPrefixes = {"｜DSML｜", "DSML｜"};
// A tag header longer than this is not a tag the model meant; the block is malformed.
constexpr size_t kMaxTagBytes = 4096;
// The longest entity we decode ("&apos;") without its ';'.
constexpr size_t kMaxPartialEntity = 5;

using scan::find_first;
using scan::is_space;
using scan::marker_partial_tail;
using scan::starts_with;
using scan::utf8_partial_tail;

// A trailing '&' that may still become one of the decoded entities.
size_t entity_partial_tail(std::string_view s) {
    const size_t amp = s.rfind('&');
    if (amp == std::string_view::npos || s.size() - amp > kMaxPartialEntity) return 0;
    for (size_t i = amp + 1; i < s.size(); ++i) {
        const char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return 0;
    }
    return s.size() - amp;
}

std::string decode_entities(std::string_view s) {
    static constexpr std::array<std::pair<std::string_view, char>, 5> kEntities = {
        {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}}};
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
        bool matched = false;
        if (s[i] == '&') {
            for (const auto& [name, ch] : kEntities) {
                if (starts_with(s.substr(i), name)) {
                    out += ch;
                    i += name.size();
                    matched = true;
                    break;
                }
            }
        }
        if (!matched) out += s[i++];
    }
    return out;
}

// JSON string body (no quotes) of already-decoded text.
std::string json_escape_body(std::string_view s) {
    std::string q = json_quote(s);
    return q.substr(1, q.size() - 2);
}

struct Tag {
    bool closing = false;
    std::string name;
    std::vector<std::pair<std::string, std::string>> attrs;  // values entity-decoded

    const std::string* attr(std::string_view key) const {
        for (const auto& [k, v] : attrs) {
            if (k == key) return &v;
        }
        return nullptr;
    }
};

enum class TagResult { Ok, NeedMore, Bad };

bool is_name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
}

// Parses the tag at the start of s (s[0] == '<'); `length` gets the bytes up to and with '>'.
TagResult parse_tag(std::string_view s, Tag& tag, size_t& length) {
    // Find the '>' that ends the tag, skipping quoted attribute values.
    char quote = 0;
    size_t end = std::string_view::npos;
    for (size_t i = 1; i < s.size() && i < kMaxTagBytes; ++i) {
        const char c = s[i];
        if (quote) {
            if (c == quote) quote = 0;
        } else if (c == '"' || c == '\'') {
            quote = c;
        } else if (c == '>') {
            end = i;
            break;
        }
    }
    if (end == std::string_view::npos) return s.size() < kMaxTagBytes ? TagResult::NeedMore : TagResult::Bad;
    length = end + 1;
    std::string_view t = s.substr(1, end - 1);
    tag.closing = starts_with(t, "/");
    if (tag.closing) t.remove_prefix(1);
    for (std::string_view p : kTagPrefixes) {
        if (starts_with(t, p)) {
            t.remove_prefix(p.size());
            break;
        }
    }
    size_t i = 0;
    while (i < t.size() && is_name_char(t[i])) ++i;
    if (i == 0) return TagResult::Bad;
    tag.name = std::string(t.substr(0, i));
    for (;;) {
        const size_t before = i;
        while (i < t.size() && is_space(t[i])) ++i;
        if (i == t.size()) break;
        if (i == before) return TagResult::Bad;  // attributes need a separating space
        const size_t key_start = i;
        while (i < t.size() && is_name_char(t[i])) ++i;
        if (i == key_start || i >= t.size() || t[i] != '=') return TagResult::Bad;
        ++i;
        if (i >= t.size() || (t[i] != '"' && t[i] != '\'')) return TagResult::Bad;
        const char q = t[i++];
        const size_t close = t.find(q, i);
        if (close == std::string_view::npos) return TagResult::Bad;
        tag.attrs.emplace_back(std::string(t.substr(key_start, t.find('=', key_start) - key_start)),
                               decode_entities(t.substr(i, close - i)));
        i = close + 1;
    }
    if (tag.closing && !tag.attrs.empty()) return TagResult::Bad;
    return TagResult::Ok;
}

}  // namespace

OutputParser::OutputParser(OutputParserOptions options)
    : options_(std::move(options)), state_(options_.thinking ? State::ThinkStart : State::LeadingEnd) {}

void OutputParser::consume(size_t n, bool raw) {
    if (raw) raw_block_.append(buf_, 0, n);
    buf_.erase(0, n);
    consumed_ += int64_t(n);
}

void OutputParser::emit(std::vector<OutputEvent>& out, Kind kind, std::string text) {
    const bool is_delta = kind == Kind::Reasoning || kind == Kind::Content || kind == Kind::ToolArguments;
    if (is_delta && text.empty()) return;
    out.push_back(OutputEvent{kind, std::move(text), kind == Kind::Reasoning || kind == Kind::Content ? 0 : call_index_});
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
        case State::BlockBetween:
        case State::InvokeBody:
        case State::StringValue:
        case State::JsonValue:
        case State::UntypedValue:
            if (state_ == State::StringValue) {
                // The value runs to the end of the output: flush it, then close the call.
                emit(out, Kind::ToolArguments, json_escape_body(decode_entities(buf_)));
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
        if (state_ == State::JsonValue || state_ == State::UntypedValue) emit(out, Kind::ToolArguments, "null");
        emit(out, Kind::ToolArguments, std::string(first_param_.size(), '}'));
        emit(out, Kind::ToolCallEnd, {});
        in_call_ = false;
    }
    first_param_.clear();
    state_ = State::Ignore;
}

bool OutputParser::step(bool eof, std::vector<OutputEvent>& out) {
    switch (state_) {
        case State::ThinkStart:
        case State::Reasoning:
        case State::LeadingEnd:
        case State::Content:
            return step_text(eof, out);
        case State::BlockBetween:
        case State::InvokeBody:
            return step_block(eof, out);
        case State::StringValue:
        case State::JsonValue:
        case State::UntypedValue:
            return step_value(eof, out);
        case State::Ignore:
            if (buf_.empty()) return false;
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
    if (options_.tools) {
        if (auto found = find_first(b, kBlockOpen)) {
            size_t keep = found->first;
            while (keep > 0 && is_space(b[keep - 1])) --keep;  // the separator belongs to the block
            emit(out, Kind::Content, std::string(b.substr(0, keep)));
            consume(found->first, false);
            consume(found->second, true);
            block_started_ = true;
            state_ = State::BlockBetween;
            return true;
        }
    }
    size_t emit_end = b.size();
    if (!eof) {
        size_t hold = utf8_partial_tail(b);
        if (options_.tools) hold = std::max(hold, marker_partial_tail(b, kBlockOpen));
        emit_end -= hold;
        // Trailing whitespace may turn out to be the separator before a tool block.
        if (options_.tools) {
            while (emit_end > 0 && is_space(b[emit_end - 1])) --emit_end;
        }
    }
    emit(out, Kind::Content, std::string(b.substr(0, emit_end)));
    consume(emit_end, false);
    return false;
}

bool OutputParser::step_block(bool eof, std::vector<OutputEvent>& out) {
    size_t ws = 0;
    while (ws < buf_.size() && is_space(buf_[ws])) ++ws;
    if (ws > 0) consume(ws, true);
    if (buf_.empty()) return false;
    if (buf_[0] != '<') {
        fail_block(out);
        return true;
    }
    Tag tag;
    size_t length = 0;
    switch (parse_tag(buf_, tag, length)) {
        case TagResult::NeedMore: return false;  // at eof finish() reports it unterminated
        case TagResult::Bad: fail_block(out); return true;
        case TagResult::Ok: break;
    }
    (void)eof;
    if (state_ == State::BlockBetween) {
        if (!tag.closing && tag.name == "invoke" && tag.attr("name")) {
            consume(length, true);
            ++call_index_;
            in_call_ = true;
            emit(out, Kind::ToolCallBegin, *tag.attr("name"));
            emit(out, Kind::ToolArguments, "{");
            first_param_.assign(1, true);
            state_ = State::InvokeBody;
            return true;
        }
        if (tag.closing && tag.name == "tool_calls") {
            consume(length, true);
            block_closed_ = true;
            state_ = State::Ignore;
            return true;
        }
        fail_block(out);
        return true;
    }
    // InvokeBody: parameters of the invoke (depth 0) or of a nested object (depth > 0).
    const size_t depth = first_param_.size() - 1;
    if (!tag.closing && tag.name == "parameter" && tag.attr("name")) {
        consume(length, true);
        std::string head = first_param_.back() ? "" : ", ";
        first_param_.back() = false;
        head += json_quote(*tag.attr("name"));
        head += ": ";
        const std::string* type = tag.attr("string");
        if (!type) {
            state_ = State::UntypedValue;
        } else if (*type == "false") {
            state_ = State::JsonValue;
        } else {
            head += '"';
            state_ = State::StringValue;
        }
        emit(out, Kind::ToolArguments, head);
        return true;
    }
    if (tag.closing && tag.name == "parameter" && depth > 0) {
        consume(length, true);
        first_param_.pop_back();
        emit(out, Kind::ToolArguments, "}");
        return true;
    }
    if (tag.closing && tag.name == "invoke" && depth == 0) {
        consume(length, true);
        emit(out, Kind::ToolArguments, "}");
        emit(out, Kind::ToolCallEnd, {});
        in_call_ = false;
        first_param_.clear();
        state_ = State::BlockBetween;
        return true;
    }
    fail_block(out);
    return true;
}

bool OutputParser::step_value(bool eof, std::vector<OutputEvent>& out) {
    const std::string_view b = buf_;
    if (state_ == State::UntypedValue) {
        // No string attribute: a body of parameter tags is a nested object, anything else a
        // string. Wait until the first non-space bytes decide it.
        size_t i = 0;
        while (i < b.size() && is_space(b[i])) ++i;
        if (i == b.size() && !eof) return false;
        const std::string_view rest = b.substr(i);
        bool nested = false;
        bool undecided = false;
        for (std::string_view p : kParamOpen) {
            if (starts_with(rest, p)) nested = true;
            else if (starts_with(p, rest)) undecided = true;
        }
        if (!nested && undecided && !eof) return false;
        if (nested) {
            consume(i, true);
            emit(out, Kind::ToolArguments, "{");
            first_param_.push_back(true);
            state_ = State::InvokeBody;
        } else {
            emit(out, Kind::ToolArguments, "\"");
            state_ = State::StringValue;
        }
        return true;
    }
    const auto close = find_first(b, kParamClose);
    if (state_ == State::JsonValue) {
        if (!close) return false;
        std::string_view raw = b.substr(0, close->first);
        while (!raw.empty() && is_space(raw.front())) raw.remove_prefix(1);
        while (!raw.empty() && is_space(raw.back())) raw.remove_suffix(1);
        std::string value;
        if (raw.empty()) {
            value = "null";
        } else {
            const auto parsed = nlohmann::ordered_json::parse(raw, nullptr, false);
            // Not JSON after all (the model mislabelled a string): keep it as a string so the
            // arguments stay valid JSON.
            value = parsed.is_discarded() ? json_quote(decode_entities(raw)) : parsed.dump();
        }
        emit(out, Kind::ToolArguments, value);
        consume(close->first + close->second, true);
        state_ = State::InvokeBody;
        return true;
    }
    // StringValue.
    if (close) {
        emit(out, Kind::ToolArguments, json_escape_body(decode_entities(b.substr(0, close->first))) + "\"");
        consume(close->first + close->second, true);
        state_ = State::InvokeBody;
        return true;
    }
    if (eof) return false;  // finish() flushes and closes
    const size_t hold = std::max({marker_partial_tail(b, kParamClose), entity_partial_tail(b),
                                  utf8_partial_tail(b)});
    emit(out, Kind::ToolArguments, json_escape_body(decode_entities(b.substr(0, b.size() - hold))));
    consume(b.size() - hold, true);
    return false;
}

ParsedOutput parse_whole(StreamParser& parser, std::string_view text) {
    std::vector<OutputEvent> events;
    parser.feed(text, events);
    parser.finish(events);
    ParsedOutput r;
    for (const auto& e : events) {
        switch (e.kind) {
            case Kind::Reasoning: r.reasoning += e.text; break;
            case Kind::Content: r.content += e.text; break;
            case Kind::ToolCallBegin: r.tool_calls.push_back({e.text, {}}); break;
            case Kind::ToolArguments: r.tool_calls.back().arguments += e.text; break;
            case Kind::ToolCallEnd: break;
        }
    }
    r.raw_block = parser.raw_block();
    r.malformed = parser.malformed();
    r.unterminated = parser.unterminated();
    if (r.malformed || r.unterminated) {
        // DS4's policy: a block that cannot be parsed is model output, returned as content.
        r.tool_calls.clear();
        r.content = parser.content_start() >= 0 ? std::string(text.substr(size_t(parser.content_start()))) : "";
    }
    return r;
}

ParsedOutput parse_output(std::string_view text, OutputParserOptions options) {
    OutputParser parser(std::move(options));
    return parse_whole(parser, text);
}

}  // namespace ds4::chat
