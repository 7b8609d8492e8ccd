// What a chat format's output parser produces, the same for every format (chat/format.h): the
// streaming events (reasoning / content text, tool calls as a header then argument JSON
// fragments), the streaming parser's interface, and the result of a whole-output parse.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ds4::chat {

struct OutputEvent {
    enum class Kind {
        Reasoning,      // text: reasoning delta
        Content,        // text: content delta
        ToolCallBegin,  // text: the function name; index: the call's position in the block
        ToolArguments,  // text: a fragment of the call's JSON arguments
        ToolCallEnd,    // the call's arguments are complete
    };
    Kind kind;
    std::string text;
    int index = 0;
};

struct OutputParserOptions {
    bool thinking = true;  // the prompt ended with the format's open-reasoning marker
    bool tools = false;    // tools are active: look for tool-call blocks in content
    // The request's OpenAI "tools" array as JSON text (empty: none given). A format whose
    // tool calls carry untyped argument text (GLM) types each value by its parameter's schema;
    // without a schema it goes by the text. DeepSeek V4's calls carry their own types.
    std::string tools_json{};
};

// A streaming parser of one reply. Feed decoded text in chunks of any size; events come out as
// soon as the text makes them certain. The concatenated argument fragments of one call form a
// JSON object. One parser per reply; not thread-safe.
class StreamParser {
public:
    virtual ~StreamParser() = default;

    // Appends the events that `chunk` makes certain to `out`.
    virtual void feed(std::string_view chunk, std::vector<OutputEvent>& out) = 0;
    // End of generation: flushes held-back text and closes an unterminated tool call.
    virtual void finish(std::vector<OutputEvent>& out) = 0;

    virtual bool block_started() const = 0;  // a tool-call block has begun
    virtual bool block_closed() const = 0;   // the block is complete: stop generating here
    virtual bool malformed() const = 0;      // a block could not be parsed
    virtual bool unterminated() const = 0;   // finish() inside a block
    // The exact bytes of the tool-call block from its opening tag (for exact replay).
    virtual const std::string& raw_block() const = 0;
    // Byte offset in the whole input where content begins (after the reasoning); -1 before.
    virtual int64_t content_start() const = 0;
};

struct ParsedToolCall {
    std::string name;
    std::string arguments;  // JSON object text
};

struct ParsedOutput {
    std::string reasoning;
    std::string content;
    std::vector<ParsedToolCall> tool_calls;
    std::string raw_block;
    bool malformed = false;     // content holds the raw text after the reasoning
    bool unterminated = false;  // likewise: a block started and never closed
};

// The whole-output parse through `parser` (a new one): every event of `text` gathered. A
// malformed or unterminated block gives no calls and the text after the reasoning as content
// (DS4's policy: what cannot be parsed is model output).
ParsedOutput parse_whole(StreamParser& parser, std::string_view text);

}  // namespace ds4::chat
