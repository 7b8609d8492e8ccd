// Where a reply stands inside a tool call, for DSML-aware sampling (spec/PRODUCT.md §4.4): the
// fixed syntax of a tool call (tags, the tool and parameter names, JSON punctuation, closing
// markers) is sampled greedily, so a hot temperature cannot break a call's structure, while
// the payload (a string parameter's body, the inside of a JSON string) keeps the request's
// sampling: forcing greedy on long file bodies makes the model loop.
//
// A tracker is fed the reply's text as it is generated (the reasoning included, and a forced
// tool choice's opening first) and says whether the next token is structure. Each chat format
// makes its own (ChatFormat::new_tool_tracker): V4's DSML and GLM's <tool_call> differ only
// in their markers and in what counts as payload.
#pragma once

#include <memory>
#include <string>
#include <string_view>

namespace ds4::chat {

class ToolTracker {
public:
    virtual ~ToolTracker() = default;
    // The next bytes of the reply.
    virtual void feed(std::string_view text) = 0;
    // The next token is tool-call structure (to be sampled greedily).
    virtual bool structural() const = 0;
};

// DeepSeek V4's DSML: inside a <｜DSML｜tool_calls> block (after </think> when the reply
// starts thinking), everything is structure but the body of a string="true" parameter (one
// without a string attribute is a string too) and the insides of JSON strings in a
// string="false" body. Once a string body's closing tag has begun (</｜DSML｜), its rest is
// structure.
std::unique_ptr<ToolTracker> new_dsml_tracker(bool thinking);
// GLM's <tool_call>name<arg_key>k</arg_key><arg_value>v</arg_value>...</tool_call>: everything
// inside a call is structure but an <arg_value> body (GLM's values are untyped text).
std::unique_ptr<ToolTracker> new_glm_tool_tracker(bool thinking);

}  // namespace ds4::chat
