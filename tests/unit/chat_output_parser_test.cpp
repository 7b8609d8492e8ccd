// Output parser: golden cases (expected values written by hand from spec/TOKENIZER_CHAT.md §4 and
// llama.cpp's tests/test-chat.cpp V4 cases), and streaming invariance: the same output split at
// every byte boundary (and fed byte by byte) gives the same events.
#include "chat/output_parser.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace ds4::chat;
using Kind = OutputEvent::Kind;

namespace {

struct Golden {
    const char* name;
    std::string text;
    OutputParserOptions opt;
    std::string reasoning;
    std::string content;
    std::vector<std::pair<std::string, std::string>> calls;  // name, arguments
    bool malformed = false;
    bool unterminated = false;
};

const OutputParserOptions kThinkTools{true, true};
const OutputParserOptions kNoThinkTools{false, true};
const OutputParserOptions kThink{true, false};
const OutputParserOptions kNoThink{false, false};

std::string B(const std::string& inner) { return "<｜DSML｜tool_calls>\n" + inner + "</｜DSML｜tool_calls>"; }

std::vector<Golden> goldens() {
    const std::string p = "<｜DSML｜parameter name=";
    const std::string pe = "</｜DSML｜parameter>\n";
    const std::string ie = "</｜DSML｜invoke>\n";
    return {
        {"lc_pure_content", "Hello, world!\nWhat's up?", kNoThinkTools, "", "Hello, world!\nWhat's up?", {}},
        {"lc_thinking_content", "I'm\nthinking</think>Hello, world!\nWhat's up?", kThink, "I'm\nthinking",
         "Hello, world!\nWhat's up?", {}},
        {"lc_thinking_tool_call",
         "Let me check the time</think>\n\n" + B("<｜DSML｜invoke name=\"get_time\">\n" + p + "\"city\" string=\"true\">Tokyo" + pe + ie),
         kThinkTools, "Let me check the time", "", {{"get_time", R"({"city": "Tokyo"})"}}},
        {"lc_nothink_int_param", B("<｜DSML｜invoke name=\"special_function\">\n" + p + "\"arg1\" string=\"false\">1" + pe + ie),
         kNoThinkTools, "", "", {{"special_function", R"({"arg1": 1})"}}},
        {"lc_parallel",
         "Calling both</think>\n\n" + B("<｜DSML｜invoke name=\"get_time\">\n" + p + "\"city\" string=\"true\">Paris" + pe + ie +
                                         "<｜DSML｜invoke name=\"get_weather\">\n" + p + "\"city\" string=\"true\">Paris" + pe + ie),
         kThinkTools, "Calling both", "", {{"get_time", R"({"city": "Paris"})"}, {"get_weather", R"({"city": "Paris"})"}}},
        {"lc_content_before_call",
         "Thinking about it</think>Let me call the function.\n\n" +
             B("<｜DSML｜invoke name=\"special_function\">\n" + p + "\"arg1\" string=\"false\">1" + pe + ie),
         kThinkTools, "Thinking about it", "Let me call the function.", {{"special_function", R"({"arg1": 1})"}}},
        {"lc_mixed_types",
         "Multi-arg call</think>\n\n" + B("<｜DSML｜invoke name=\"magic_int\">\n" + p + "\"ref\" string=\"false\">42" + pe + p +
                                           "\"name\" string=\"true\">foo bar" + pe + ie),
         kThinkTools, "Multi-arg call", "", {{"magic_int", R"({"ref": 42, "name": "foo bar"})"}}},
        {"leading_think_tag_stripped", "<think>r</think>c", kThink, "r", "c", {}},
        {"nothink_leading_end_tag_dropped", "</think>answer", kNoThink, "", "answer", {}},
        {"unclosed_reasoning_is_all_reasoning", "still thinking <｜DSML｜tool_calls>", kThinkTools,
         "still thinking <｜DSML｜tool_calls>", "", {}},
        {"dsml_in_reasoning_not_executable",
         "I could write " + B("<｜DSML｜invoke name=\"x\">\n" + ie) + "</think>No tools needed.", kThinkTools,
         "I could write " + B("<｜DSML｜invoke name=\"x\">\n" + ie), "No tools needed.", {}},
        {"tools_off_dsml_is_content", "a\n\n" + B("<｜DSML｜invoke name=\"f\">\n" + ie), kNoThink, "",
         "a\n\n" + B("<｜DSML｜invoke name=\"f\">\n" + ie), {}},
        {"degraded_first_bar_missing",
         "x</think>\n\n<DSML｜tool_calls>\n<DSML｜invoke name=\"f\">\n<DSML｜parameter name=\"a\" string=\"true\">v</DSML｜parameter>\n</DSML｜invoke>\n</DSML｜tool_calls>",
         kThinkTools, "x", "", {{"f", R"({"a": "v"})"}}},
        {"plain_xml_variant",
         "ok <tool_calls><invoke name=\"f\"><parameter name=\"n\" string=\"false\"> [1, 2,\n 3] </parameter></invoke></tool_calls>",
         kNoThinkTools, "", "ok", {{"f", R"({"n": [1,2,3]})"}}},
        {"mixed_spellings_in_one_block",
         B("<invoke name=\"f\">\n<DSML｜parameter name=\"a\" string=\"true\">1</parameter>\n</｜DSML｜invoke>\n"), kNoThinkTools, "", "",
         {{"f", R"({"a": "1"})"}}},
        {"entities_and_escaped_close_tag",
         B("<｜DSML｜invoke name=\"w&amp;r\">\n" + p + "\"s\" string=\"true\">a &lt;b&gt; &amp;&amp; &quot;q&quot; &apos; &nbsp; & &lt;/｜DSML｜parameter> end" + pe + ie),
         kNoThinkTools, "", "", {{"w&r", R"({"s": "a <b> && \"q\" ' &nbsp; & </｜DSML｜parameter> end"})"}}},
        {"string_value_json_escaped", B("<｜DSML｜invoke name=\"f\">\n" + p + "\"s\" string=\"true\">line1\nta\tb \\ é 日本 🙂" + pe + ie),
         kNoThinkTools, "", "", {{"f", "{\"s\": \"line1\\nta\\tb \\\\ é 日本 🙂\"}"}}},
        {"no_string_attr_is_string", B("<｜DSML｜invoke name=\"f\">\n" + p + "\"s\">  42 " + pe + ie), kNoThinkTools, "", "",
         {{"f", R"({"s": "  42 "})"}}},
        {"nested_parameters_become_object",
         B("<｜DSML｜invoke name=\"f\">\n" + p + "\"opts\">\n" + p + "\"depth\" string=\"false\">2" + pe + p + "\"inner\">\n" + p +
           "\"k\" string=\"true\">v" + pe + "</｜DSML｜parameter>\n" + "</｜DSML｜parameter>\n" + p + "\"z\" string=\"true\">last" + pe + ie),
         kNoThinkTools, "", "", {{"f", R"({"opts": {"depth": 2, "inner": {"k": "v"}}, "z": "last"})"}}},
        {"json_value_edge_cases",
         B("<｜DSML｜invoke name=\"f\">\n" + p + "\"e\" string=\"false\">  " + pe + p + "\"bad\" string=\"false\">Paris &amp; co" + pe + p +
           "\"o\" string=\"false\">{ \"a\" : [ true , null ] }" + pe + ie),
         kNoThinkTools, "", "", {{"f", R"({"e": null, "bad": "Paris & co", "o": {"a":[true,null]}})"}}},
        {"zero_argument_call", B("<｜DSML｜invoke name=\"now\">\n\n" + ie), kNoThinkTools, "", "", {{"now", "{}"}}},
        {"text_after_block_ignored", B("<｜DSML｜invoke name=\"f\">\n" + ie) + "\ntrailing junk", kNoThinkTools, "", "", {{"f", "{}"}}},
        {"orphan_close_marker_is_content", "done </｜DSML｜tool_calls> ok  ", kNoThinkTools, "", "done </｜DSML｜tool_calls> ok  ", {}},
        {"content_whitespace_kept_without_block", "a  \n b\n\n", kNoThinkTools, "", "a  \n b\n\n", {}},
        {"partial_marker_at_end_flushed", "x <｜DSML｜tool", kNoThinkTools, "", "x <｜DSML｜tool", {}},
        {"malformed_text_between_invokes",
         "pre\n\n" + B("<｜DSML｜invoke name=\"f\">\n" + ie + "oops\n"), kNoThinkTools, "",
         "pre\n\n" + B("<｜DSML｜invoke name=\"f\">\n" + ie + "oops\n"), {}, true},
        {"malformed_unknown_tag_in_invoke",
         "r</think>" + B("<｜DSML｜invoke name=\"f\">\n<｜DSML｜param name=\"a\">x" + pe + ie), kThinkTools, "r",
         B("<｜DSML｜invoke name=\"f\">\n<｜DSML｜param name=\"a\">x" + pe + ie), {}, true},
        {"malformed_invoke_without_name", B("<｜DSML｜invoke id=\"f\">\n" + ie), kNoThinkTools, "", B("<｜DSML｜invoke id=\"f\">\n" + ie), {}, true},
        {"unterminated_block", "c\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n" + p + "\"a\" string=\"true\">par", kNoThinkTools, "",
         "c\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n" + p + "\"a\" string=\"true\">par", {}, false, true},
    };
}

// Adjacent text deltas of one kind and call merged: the chunk-independent form of a stream.
std::vector<OutputEvent> normalize(const std::vector<OutputEvent>& events) {
    std::vector<OutputEvent> out;
    for (const auto& e : events) {
        const bool delta = e.kind == Kind::Reasoning || e.kind == Kind::Content || e.kind == Kind::ToolArguments;
        if (delta && !out.empty() && out.back().kind == e.kind && out.back().index == e.index) {
            out.back().text += e.text;
        } else {
            out.push_back(e);
        }
    }
    return out;
}

bool valid_utf8(const std::string& s) {
    for (size_t i = 0; i < s.size();) {
        const auto c = static_cast<unsigned char>(s[i]);
        const size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 0;
        if (n == 0 || i + n > s.size()) return false;
        for (size_t k = 1; k < n; ++k) {
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        }
        i += n;
    }
    return true;
}

struct StreamRun {
    std::vector<OutputEvent> events;
    bool malformed, unterminated, closed;
    std::string raw;
};

StreamRun run_chunks(const std::string& text, OutputParserOptions opt, const std::vector<size_t>& cuts) {
    OutputParser parser(opt);
    StreamRun r;
    size_t prev = 0;
    for (size_t c : cuts) {
        parser.feed(std::string_view(text).substr(prev, c - prev), r.events);
        prev = c;
    }
    parser.feed(std::string_view(text).substr(prev), r.events);
    parser.finish(r.events);
    r.malformed = parser.malformed();
    r.unterminated = parser.unterminated();
    r.closed = parser.block_closed();
    r.raw = parser.raw_block();
    return r;
}

void expect_same(const StreamRun& a, const StreamRun& b, const std::string& where) {
    const auto na = normalize(a.events);
    const auto nb = normalize(b.events);
    ASSERT_EQ(na.size(), nb.size()) << where;
    for (size_t i = 0; i < na.size(); ++i) {
        EXPECT_EQ(int(na[i].kind), int(nb[i].kind)) << where << " event " << i;
        EXPECT_EQ(na[i].text, nb[i].text) << where << " event " << i;
        EXPECT_EQ(na[i].index, nb[i].index) << where << " event " << i;
    }
    EXPECT_EQ(a.malformed, b.malformed) << where;
    EXPECT_EQ(a.unterminated, b.unterminated) << where;
    EXPECT_EQ(a.closed, b.closed) << where;
    EXPECT_EQ(a.raw, b.raw) << where;
    for (const auto& e : b.events) {
        EXPECT_TRUE(valid_utf8(e.text)) << where << " emitted a partial UTF-8 sequence";
        EXPECT_FALSE(e.kind != Kind::ToolCallEnd && e.kind != Kind::ToolCallBegin && e.text.empty()) << where;
    }
}

TEST(ChatOutputParser, Goldens) {
    for (const auto& g : goldens()) {
        SCOPED_TRACE(g.name);
        const ParsedOutput r = parse_output(g.text, g.opt);
        EXPECT_EQ(r.reasoning, g.reasoning);
        EXPECT_EQ(r.content, g.content);
        EXPECT_EQ(r.malformed, g.malformed);
        EXPECT_EQ(r.unterminated, g.unterminated);
        ASSERT_EQ(r.tool_calls.size(), g.calls.size());
        for (size_t i = 0; i < g.calls.size(); ++i) {
            EXPECT_EQ(r.tool_calls[i].name, g.calls[i].first);
            EXPECT_EQ(r.tool_calls[i].arguments, g.calls[i].second);
        }
    }
}

TEST(ChatOutputParser, ArgumentsAreValidJsonEvenWhenMalformedMidCall) {
    // The stream has already announced the call: its arguments must still close as JSON.
    std::vector<OutputEvent> ev;
    OutputParser p(kNoThinkTools);
    p.feed(B("<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x</｜DSML｜parameter>\n???"), ev);
    p.finish(ev);
    std::string args;
    for (const auto& e : ev) {
        if (e.kind == Kind::ToolArguments) args += e.text;
    }
    EXPECT_TRUE(p.malformed());
    EXPECT_EQ(args, R"({"a": "x"})");
    EXPECT_EQ(ev.back().kind, Kind::ToolCallEnd);
}

TEST(ChatOutputParser, StopsAtBlockCloseAndKeepsRawBlock) {
    const std::string block = B("<｜DSML｜invoke name=\"f\">\n\n</｜DSML｜invoke>\n");
    std::vector<OutputEvent> ev;
    OutputParser p(kNoThinkTools);
    p.feed("hi\n\n" + block, ev);
    EXPECT_TRUE(p.block_closed());
    EXPECT_EQ(p.raw_block(), block);
}

TEST(ChatOutputParser, HoldsBackPartialMarkers) {
    std::vector<OutputEvent> ev;
    OutputParser p(kThinkTools);
    p.feed("<thi", ev);
    EXPECT_TRUE(ev.empty());
    p.feed("nk>abc</thi", ev);
    ASSERT_EQ(ev.size(), 1u);
    EXPECT_EQ(ev[0].text, "abc");
    p.feed("nk>ok\n\n<｜DS", ev);
    ASSERT_EQ(ev.size(), 2u);
    EXPECT_EQ(ev[1].kind, Kind::Content);
    EXPECT_EQ(ev[1].text, "ok");  // "\n\n<｜DS" may still become the block separator
    p.feed("ML｜tool_calls>\n<｜DSML｜invoke name=\"f\">\n<｜DSML｜parameter name=\"a\" string=\"true\">x &am", ev);
    EXPECT_EQ(ev.back().kind, Kind::ToolArguments);
    EXPECT_EQ(ev.back().text, "x ");  // "&am" may still become "&amp;"
    p.feed("p; \xE6\x97", ev);
    EXPECT_EQ(ev.back().text, "& ");  // the half character waits
    p.feed("\xA5</｜DSML｜param", ev);
    EXPECT_EQ(ev.back().text, "\xE6\x97\xA5");
}

TEST(ChatOutputParser, EverySplitPointParsesIdentically) {
    for (const auto& g : goldens()) {
        SCOPED_TRACE(g.name);
        const StreamRun whole = run_chunks(g.text, g.opt, {});
        for (size_t cut = 1; cut < g.text.size(); ++cut) {
            expect_same(whole, run_chunks(g.text, g.opt, {cut}), "split at " + std::to_string(cut));
            if (::testing::Test::HasFailure()) return;
        }
        std::vector<size_t> bytes;
        for (size_t i = 1; i < g.text.size(); ++i) bytes.push_back(i);
        expect_same(whole, run_chunks(g.text, g.opt, bytes), "byte by byte");
        // Three pieces at pseudo-random points.
        uint32_t x = 12345;
        for (int t = 0; t < 50 && g.text.size() > 2; ++t) {
            x = x * 1664525u + 1013904223u;
            size_t a = 1 + (x >> 8) % (g.text.size() - 1);
            x = x * 1664525u + 1013904223u;
            size_t b = 1 + (x >> 8) % (g.text.size() - 1);
            if (a > b) std::swap(a, b);
            expect_same(whole, run_chunks(g.text, g.opt, {a, b}), "three pieces");
        }
    }
}

}  // namespace
