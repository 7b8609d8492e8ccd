// The DeepSeek V4 format's output parser (chat/deepseek4_format.h wraps it as a ChatFormat;
// callers outside src/chat go through the ChatFormat). Streaming parser for DeepSeek V4 model
// output (spec/TOKENIZER_CHAT.md §4, spec/PRODUCT.md §4.6).
// Feed decoded text in chunks of any size (even split inside a marker, an entity or a UTF-8
// sequence); it emits events: reasoning / content text, and tool calls as a header (name) then
// argument JSON text fragments. The concatenated argument fragments of one call form a JSON
// object `{"k": v, ...}`. Nothing half-formed is emitted: partial markers, partial entities and
// incomplete UTF-8 are held back until the next chunk decides them (or until finish()).
// The event sequence depends only on the whole text, never on how it was chunked (apart from
// how text deltas of one kind are split).
//
// What is accepted (the DS4 server's tolerant rules):
//   * thinking: an optional leading <think>; reasoning runs to the first </think>. DSML inside
//     reasoning is not executable (it stays reasoning). Non-thinking: a leading bare </think>
//     is dropped.
//   * with tools: a block starts at <｜DSML｜tool_calls>, or the degraded <DSML｜tool_calls>, or
//     plain <tool_calls>; the whitespace before it is dropped (content is right-trimmed). Every
//     tag in the block may use any of the three spellings. Inside: invoke name="..." tags with
//     parameter name="..." [string="true|false"] children. string="true" (or no attribute)
//     values are entity-decoded (&amp; &lt; &gt; &quot; &apos;) and become JSON strings;
//     string="false" values are minified JSON, `null` if empty, or a JSON string if they do not
//     parse. A parameter without a string attribute whose body starts with parameter tags
//     becomes a nested object. Text after </…tool_calls> is ignored (generation should stop).
//   * anything else inside a block marks the output malformed: the open call is closed (its
//     JSON stays valid) and the rest is ignored. parse_output() then returns the raw text as
//     content, as DS4 does; a streaming client has seen the events and checks malformed().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/output.h"

namespace ds4::chat {

class OutputParser final : public StreamParser {
public:
    explicit OutputParser(OutputParserOptions options);

    // chat/output.h states the contract; content_start() is the offset after </think>.
    void feed(std::string_view chunk, std::vector<OutputEvent>& out) override;
    void finish(std::vector<OutputEvent>& out) override;
    bool block_started() const override { return block_started_; }
    bool block_closed() const override { return block_closed_; }
    bool malformed() const override { return malformed_; }
    bool unterminated() const override { return unterminated_; }
    const std::string& raw_block() const override { return raw_block_; }
    int64_t content_start() const override { return content_start_; }

private:
    enum class State {
        ThinkStart, Reasoning, LeadingEnd, Content,
        BlockBetween, InvokeBody, StringValue, JsonValue, UntypedValue, Ignore,
    };
    bool step(bool eof, std::vector<OutputEvent>& out);  // false: needs more input
    bool step_text(bool eof, std::vector<OutputEvent>& out);
    bool step_block(bool eof, std::vector<OutputEvent>& out);
    bool step_value(bool eof, std::vector<OutputEvent>& out);
    void consume(size_t n, bool raw);
    void emit(std::vector<OutputEvent>& out, OutputEvent::Kind kind, std::string text);
    void fail_block(std::vector<OutputEvent>& out);

    OutputParserOptions options_;
    State state_;
    std::string buf_;  // unconsumed input
    std::string raw_block_;
    std::vector<bool> first_param_;  // per open object level (0 = the invoke)
    int64_t consumed_ = 0;  // bytes of input consumed so far
    int64_t content_start_ = -1;
    int call_index_ = -1;
    bool in_call_ = false;
    bool block_started_ = false;
    bool block_closed_ = false;
    bool malformed_ = false;
    bool unterminated_ = false;
};

// Parses a complete output (no EOS text) in one go; the authoritative final parse.
ParsedOutput parse_output(std::string_view text, OutputParserOptions options);

}  // namespace ds4::chat
