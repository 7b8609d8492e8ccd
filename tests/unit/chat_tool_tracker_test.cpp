// DSML-aware sampling's trackers (chat/tool_tracker.h, spec/PRODUCT.md §4.4): byte by byte,
// which positions of a reply are tool-call structure (sampled greedily) and which are payload
// (the request's sampling), for V4's DSML and GLM's <tool_call>.
#include <gtest/gtest.h>

#include <string>

#include "chat/tool_tracker.h"

namespace ds4::chat {
namespace {

const std::string D = "\xef\xbd\x9c" "DSML" "\xef\xbd\x9c";

// structural() after each prefix of `text`, as a string of 's' (structure) and 'p' (payload
// or outside a call): the decision for the byte that comes next.
std::string trace(ToolTracker& t, const std::string& text) {
    std::string out;
    for (char c : text) {
        out += t.structural() ? 's' : 'p';
        t.feed(std::string_view(&c, 1));
    }
    out += t.structural() ? 's' : 'p';
    return out;
}

// The decision at the end of `before` (fed whole).
bool structural_after(ToolTracker& t, const std::string& before) {
    t.feed(before);
    return t.structural();
}

TEST(DsmlTracker, StructureIsGreedyAndStringBodiesAndJsonStringsAreNot) {
    const std::string open = "\n\n<" + D + "tool_calls>\n<" + D + "invoke name=\"get_weather\">\n<" + D +
                             "parameter name=\"city\" string=\"true\">";
    // Before the block: the request's sampling.
    EXPECT_FALSE(structural_after(*new_dsml_tracker(false), "Let me check."));
    // Inside the block, between and within tags: structure (the tool and parameter names too).
    EXPECT_TRUE(structural_after(*new_dsml_tracker(false), "\n\n<" + D + "tool_calls>"));
    EXPECT_TRUE(structural_after(*new_dsml_tracker(false), "\n\n<" + D + "tool_calls>\n<" + D + "invoke name=\"get_"));
    // A string body is payload...
    EXPECT_FALSE(structural_after(*new_dsml_tracker(false), open));
    EXPECT_FALSE(structural_after(*new_dsml_tracker(false), open + "Paris, <b>France</b> & more"));
    // ...until its closing tag has begun (the marker is out), then structure again.
    EXPECT_TRUE(structural_after(*new_dsml_tracker(false), open + "Paris</" + D));
    EXPECT_TRUE(structural_after(*new_dsml_tracker(false), open + "Paris</" + D + "param"));
    EXPECT_TRUE(structural_after(*new_dsml_tracker(false), open + "Paris</" + D + "parameter>\n"));
    // A parameter without a string attribute is a string.
    EXPECT_FALSE(structural_after(*new_dsml_tracker(false), "<" + D + "tool_calls>\n<" + D + "invoke name=\"f\">\n<" +
                                                               D + "parameter name=\"x\">abc"));
    // After the block: the request's sampling again.
    EXPECT_FALSE(structural_after(*new_dsml_tracker(false), open + "Paris</" + D + "parameter>\n</" + D +
                                                               "invoke>\n</" + D + "tool_calls>"));
}

TEST(DsmlTracker, JsonValuesKeepTheirStringsSampled) {
    const std::string open = "<" + D + "tool_calls>\n<" + D + "invoke name=\"f\">\n<" + D +
                             "parameter name=\"opts\" string=\"false\">";
    auto t = new_dsml_tracker(false);
    // {"a": "x\"}y", "n": [1]}: punctuation, keys' quotes and numbers are structure; the
    // insides of strings (an escaped quote included) are payload.
    const std::string json = "{\"a\": \"x\\\"}y\", \"n\": [1]}";
    const std::string got = trace(*t, open + json + "</" + D + "parameter>\n").substr(open.size());
    // One decision per byte of json (before it), then the closing tag's.
    EXPECT_EQ(got.substr(0, json.size()), "ssppsssppppppsssppssssss") << got;
    EXPECT_EQ(got.back(), 's');  // after </｜DSML｜parameter>\n: structure (next invoke or close)
}

TEST(DsmlTracker, NothingIsStructureInsideTheReasoning) {
    const std::string block = "\n\n<" + D + "tool_calls>\n<" + D + "invoke name=\"f\">\n";
    // A block written while thinking is not a call (§4.6): no greedy there.
    EXPECT_FALSE(structural_after(*new_dsml_tracker(true), "I could call" + block));
    EXPECT_TRUE(structural_after(*new_dsml_tracker(true), "I could call.</think>" + block));
    // A forced tool choice in thinking mode: the opening starts with </think>.
    EXPECT_TRUE(structural_after(*new_dsml_tracker(true), "</think>" + block));
}

TEST(GlmToolTracker, ArgumentValuesArePayload) {
    auto t = new_glm_tool_tracker(true);
    EXPECT_FALSE(structural_after(*t, "<think>maybe <tool_call>x"));  // inside reasoning
    EXPECT_FALSE(structural_after(*t, "</think>Checking."));
    EXPECT_TRUE(structural_after(*t, "<tool_call>get_"));
    EXPECT_TRUE(structural_after(*t, "weather<arg_key>ci"));
    EXPECT_FALSE(structural_after(*t, "ty</arg_key><arg_value>Par"));
    EXPECT_TRUE(structural_after(*t, "is</arg_value>"));
    EXPECT_FALSE(structural_after(*t, "</tool_call>"));
    EXPECT_TRUE(structural_after(*t, "<tool_call>"));  // a second call
}

}  // namespace
}  // namespace ds4::chat
