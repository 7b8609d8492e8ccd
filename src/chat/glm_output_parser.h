// The GLM 5.2 format's output parser (chat/glm_format.h wraps it as a ChatFormat; callers
// outside src/chat go through the ChatFormat). Feed decoded text in chunks of any size (even
// split inside a marker or a UTF-8 sequence); events come out as soon as the text makes them
// certain, and depend only on the whole text, never on the chunking (apart from how text
// deltas of one kind are split). Nothing half-formed is emitted.
//
// What is accepted:
//   * thinking: an optional leading <think>; reasoning runs to the first </think>. Tool calls
//     inside reasoning are not executable (they stay reasoning). Non-thinking: a leading bare
//     </think> is dropped.
//   * with tools: a call starts at <tool_call> in the content; the whitespace before it is
//     dropped (content is right-trimmed). <tool_call>NAME, then any number of
//     <arg_key>K</arg_key><arg_value>V</arg_value> pairs, then </tool_call>; whitespace
//     between the tags is allowed and the name and keys are trimmed (GLM 4.6 wrote newlines
//     there). Calls may follow one another (whitespace between them). The first text after a
//     call that is not another call closes the block (it is ignored: generation should have
//     stopped at <|observation|>); so does the end of the output.
//   * argument values are raw text (no entities, no escapes: the template writes strings raw
//     and other values as JSON). Each becomes a JSON value by its parameter's schema in
//     OutputParserOptions::tools_json: a parameter that may be a string (type "string" or a
//     list holding it, a string enum or const, an anyOf / oneOf / allOf branch that may be)
//     gets the text as a JSON string, streamed as it comes; one that may not gets the text
//     parsed as JSON (a string when it does not parse; null when empty). A parameter without
//     a schema gets JSON when the text parses as a JSON value other than a string, else the
//     text as a string.
//   * anything else inside a call marks the output malformed: the open call is closed (its
//     JSON stays valid) and the rest is ignored; parse_glm_output() then returns the raw text
//     after the reasoning as content, as the V4 parser does. A call still open at the end is
//     unterminated.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output.h"

namespace ds4::chat::glm {

class OutputParser final : public StreamParser {
public:
    explicit OutputParser(OutputParserOptions options);

    // chat/output.h states the contract; content_start() is the offset after </think>, and
    // raw_block() runs from the first <tool_call> through the last </tool_call>.
    void feed(std::string_view chunk, std::vector<OutputEvent>& out) override;
    void finish(std::vector<OutputEvent>& out) override;
    bool block_started() const override { return block_started_; }
    bool block_closed() const override { return block_closed_; }
    bool malformed() const override { return malformed_; }
    bool unterminated() const override { return unterminated_; }
    const std::string& raw_block() const override { return raw_block_; }
    int64_t content_start() const override { return content_start_; }

    // How an argument value becomes JSON (see above).
    enum class ValueKind { String, Json, Untyped };
    // tool name -> parameter name -> kind, from an OpenAI tools array (empty when absent or
    // not valid JSON: the renderer reports that).
    using Schemas = std::map<std::string, std::map<std::string, ValueKind>, std::less<>>;
    static Schemas schemas_of(const std::string& tools_json);

private:
    enum class State {
        ThinkStart, Reasoning, LeadingEnd, Content,
        Name, Args, Key, ValueOpen, StringValue, BufferedValue, Between, Ignore,
    };
    bool step(bool eof, std::vector<OutputEvent>& out);  // false: needs more input
    bool step_text(bool eof, std::vector<OutputEvent>& out);
    bool step_call(bool eof, std::vector<OutputEvent>& out);
    bool step_value(bool eof, std::vector<OutputEvent>& out);
    bool step_between(bool eof);
    void consume(size_t n, bool raw);
    void emit(std::vector<OutputEvent>& out, OutputEvent::Kind kind, std::string text);
    void fail_block(std::vector<OutputEvent>& out);
    ValueKind kind_of(const std::string& key) const;

    bool thinking_, tools_;
    Schemas schemas_;
    State state_;
    std::string buf_;  // unconsumed input
    std::string raw_block_;
    std::string name_;  // the open call's tool name
    std::string key_;   // the argument whose <arg_value> comes next
    ValueKind value_kind_ = ValueKind::Untyped;
    int64_t consumed_ = 0;  // bytes of input consumed so far
    int64_t content_start_ = -1;
    int call_index_ = -1;
    bool in_call_ = false;
    bool first_arg_ = true;
    bool block_started_ = false;
    bool block_closed_ = false;
    bool malformed_ = false;
    bool unterminated_ = false;
};

// Parses a complete output (no stop-token text) in one go; the authoritative final parse.
ParsedOutput parse_output(std::string_view text, OutputParserOptions options);

}  // namespace ds4::chat::glm
