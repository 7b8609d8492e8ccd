// The GLM output parser (chat/glm_output_parser.h): golden cases (expected values written by
// hand from the GLM template and llama.cpp's tests/test-chat.cpp GLM-4.7-Flash cases), value
// typing by the tools' schemas, streaming invariance (the output split at every byte boundary
// and fed byte by byte gives the events of the whole parse, no partial marker or UTF-8 leaks),
// and exact replay: the canonical call text parses back to the calls.
#include "chat/glm_output_parser.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include <string>
#include <vector>

#include "chat/glm_render.h"

namespace ds4::chat::glm {
namespace {

using Kind = OutputEvent::Kind;
using ojson = nlohmann::ordered_json;

// llama.cpp's test tools and a mixed one.
const std::string kTools = R"([
 {"type":"function","function":{"name":"special_function","parameters":{"type":"object","properties":{"arg1":{"type":"integer"}},"required":["arg1"]}}},
 {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},
 {"type":"function","function":{"name":"mixed","parameters":{"type":"object","properties":{
   "s":{"type":"string"},"n":{"type":"number"},"b":{"type":"boolean"},"o":{"type":"object"},"a":{"type":"array"},
   "sn":{"type":["string","null"]},"e":{"enum":["1","2"]},"ei":{"enum":[1,2]},"any":{"anyOf":[{"type":"integer"},{"type":"string"}]},
   "int_or_null":{"oneOf":[{"type":"integer"},{"type":"null"}]},"free":{}}}}}
])";

OutputParserOptions opts(bool thinking, bool tools, bool schemas = true) {
    return {.thinking = thinking, .tools = tools, .tools_json = tools && schemas ? kTools : std::string()};
}

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

std::string kv(const std::string& k, const std::string& v) {
    return "<arg_key>" + k + "</arg_key><arg_value>" + v + "</arg_value>";
}

std::vector<Golden> goldens() {
    const std::string sf = "<tool_call>special_function" + kv("arg1", "1") + "</tool_call>";
    return {
        {"lc_pure_content", "Hello, world!\nWhat's up?", opts(false, true), "", "Hello, world!\nWhat's up?", {}},
        {"lc_reasoning_content", "I'm\nthinking</think>Hello, world!\nWhat's up?", opts(true, false), "I'm\nthinking",
         "Hello, world!\nWhat's up?", {}},
        {"lc_call_no_reasoning", sf, opts(false, true), "", "", {{"special_function", R"({"arg1": 1})"}}},
        {"lc_call_with_reasoning", "I'm\nthinking</think>" + sf, opts(true, true), "I'm\nthinking", "",
         {{"special_function", R"({"arg1": 1})"}}},
        {"lc_parallel", sf + "<tool_call>get_time" + kv("city", "Paris") + "</tool_call>", opts(false, true), "", "",
         {{"special_function", R"({"arg1": 1})"}, {"get_time", R"({"city": "Paris"})"}}},
        {"lc_no_args", "Let me read the diff content.</think><tool_call>read_file_diff_md</tool_call>", opts(true, true),
         "Let me read the diff content.", "", {{"read_file_diff_md", "{}"}}},
        {"content_before_call_trimmed", "r</think>Let me call it.\n\n" + sf + "\n", opts(true, true), "r", "Let me call it.",
         {{"special_function", R"({"arg1": 1})"}}},
        {"glm46_newlines_between_tags",
         "<tool_call>special_function\n<arg_key>arg1</arg_key>\n<arg_value>1</arg_value>\n</tool_call>\n\n"
         "<tool_call> get_time \n<arg_key> city </arg_key>\n<arg_value> Rome </arg_value>\n</tool_call>",
         opts(false, true), "", "", {{"special_function", R"({"arg1": 1})"}, {"get_time", R"({"city": " Rome "})"}}},
        {"schema_types",
         "<tool_call>mixed" + kv("s", "42") + kv("n", " 2.5 ") + kv("b", "true") + kv("o", "{\"k\": [1, null]}") +
             kv("a", "[1, \"x\"]") + kv("sn", "null") + kv("e", "1") + kv("ei", "2") + kv("any", "7") +
             kv("int_or_null", "null") + kv("free", "[true]") + kv("unknown", "3") + "</tool_call>",
         opts(false, true), "", "",
         {{"mixed", R"({"s": "42", "n": 2.5, "b": true, "o": {"k":[1,null]}, "a": [1,"x"], "sn": "null", "e": "1", )"
                    R"("ei": 2, "any": "7", "int_or_null": null, "free": [true], "unknown": 3})"}}},
        {"schema_mistyped_values_stay_valid_json", "<tool_call>mixed" + kv("n", "two") + kv("b", "") + "</tool_call>",
         opts(false, true), "", "", {{"mixed", R"({"n": "two", "b": null})"}}},
        {"no_schema_goes_by_the_text",
         "<tool_call>mixed" + kv("s", "42") + kv("t", "hello world") + kv("q", "\"quoted\"") + kv("o", "{\"a\": 1}") +
             kv("empty", "") + "</tool_call>",
         opts(false, true, false), "", "", {{"mixed", R"({"s": 42, "t": "hello world", "q": "\"quoted\"", "o": {"a":1}, "empty": ""})"}}},
        {"string_values_raw_and_escaped",
         "<tool_call>get_time" + kv("city", "a &lt; b\n\t\\ \"q\" é 日本 🙂 <b>") + "</tool_call>", opts(false, true), "", "",
         {{"get_time", "{\"city\": \"a &lt; b\\n\\t\\\\ \\\"q\\\" é 日本 🙂 <b>\"}"}}},
        {"call_in_reasoning_not_executable", "maybe " + sf + "</think>No tools needed.", opts(true, true),
         "maybe " + sf, "No tools needed.", {}},
        {"unclosed_reasoning_is_all_reasoning", "still thinking " + sf, opts(true, true), "still thinking " + sf, "", {}},
        {"leading_think_tag_stripped", "<think>r</think>c", opts(true, false), "r", "c", {}},
        {"nothink_leading_end_tag_dropped", "</think>answer", opts(false, false), "", "answer", {}},
        {"tools_off_call_is_content", "a " + sf, opts(false, false), "", "a " + sf, {}},
        {"text_after_calls_closes_and_is_ignored", sf + "\n\ntrailing text <tool_call>x</tool_call>", opts(false, true), "",
         "", {{"special_function", R"({"arg1": 1})"}}},
        {"orphan_close_tag_is_content", "done </tool_call> ok  ", opts(false, true), "", "done </tool_call> ok  ", {}},
        {"content_whitespace_kept_without_call", "a  \n b\n\n", opts(false, true), "", "a  \n b\n\n", {}},
        {"partial_marker_at_end_flushed", "x <tool_", opts(false, true), "", "x <tool_", {}},
        {"malformed_text_inside_call", "pre " + std::string("<tool_call>f oops <arg_value>1</arg_value></tool_call>"),
         opts(false, true), "", "pre <tool_call>f oops <arg_value>1</arg_value></tool_call>", {}, true},
        {"malformed_value_without_key", "r</think><tool_call>f<arg_value>1</arg_value></tool_call>", opts(true, true), "r",
         "<tool_call>f<arg_value>1</arg_value></tool_call>", {}, true},
        {"malformed_empty_name", "<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", opts(false, true),
         "", "<tool_call><arg_key>a</arg_key><arg_value>1</arg_value></tool_call>", {}, true},
        {"unterminated_call", "c\n\n<tool_call>get_time<arg_key>city</arg_key><arg_value>Par", opts(false, true), "",
         "c\n\n<tool_call>get_time<arg_key>city</arg_key><arg_value>Par", {}, false, true},
        {"unterminated_after_value", "<tool_call>get_time" + kv("city", "Paris"), opts(false, true), "",
         "<tool_call>get_time" + kv("city", "Paris"), {}, false, true},
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
        for (size_t k = 1; k < n; ++k)
            if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return false;
        i += n;
    }
    return true;
}

struct StreamRun {
    std::vector<OutputEvent> events;
    bool malformed, unterminated, closed;
    std::string raw;
    int64_t content_start;
};

StreamRun run_chunks(const std::string& text, const OutputParserOptions& opt, const std::vector<size_t>& cuts) {
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
    r.content_start = parser.content_start();
    return r;
}

void expect_same(const StreamRun& a, const StreamRun& b, const std::string& where) {
    const auto na = normalize(a.events), nb = normalize(b.events);
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
    EXPECT_EQ(a.content_start, b.content_start) << where;
    for (const auto& e : b.events) {
        EXPECT_TRUE(valid_utf8(e.text)) << where << " emitted a partial UTF-8 sequence";
        EXPECT_FALSE(e.kind != Kind::ToolCallEnd && e.kind != Kind::ToolCallBegin && e.text.empty()) << where;
    }
}

TEST(GlmOutputParser, Goldens) {
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
            EXPECT_EQ(ojson::parse(r.tool_calls[i].arguments), ojson::parse(g.calls[i].second)) << r.tool_calls[i].arguments;
        }
    }
}

TEST(GlmOutputParser, BlockStateAndRawBlock) {
    const std::string block = "<tool_call>get_time" + kv("city", "Rome") + "</tool_call>\n<tool_call>g</tool_call>";
    OutputParser p(opts(true, true));
    std::vector<OutputEvent> ev;
    p.feed("why</think>Sure.\n\n" + block, ev);
    EXPECT_TRUE(p.block_started());
    EXPECT_FALSE(p.block_closed());  // another call may follow: generation stops at <|observation|>
    EXPECT_EQ(p.content_start(), 11);
    p.feed("\n\nmore", ev);
    EXPECT_TRUE(p.block_closed());  // text that is not a call closes the block
    p.finish(ev);
    EXPECT_EQ(p.raw_block(), block);
    EXPECT_FALSE(p.malformed());
    // The end of the output closes it too.
    OutputParser q(opts(false, true));
    q.feed(block + "\n", ev);
    EXPECT_FALSE(q.block_closed());
    q.finish(ev);
    EXPECT_TRUE(q.block_closed());
    EXPECT_EQ(q.raw_block(), block);
}

TEST(GlmOutputParser, ArgumentsAreValidJsonWhenCutAnywhere) {
    // Whatever the state when the output ends or goes wrong, a begun call's arguments close as JSON.
    const std::string full = "<tool_call>mixed" + kv("s", "text") + kv("n", "12") + "</tool_call>";
    for (size_t cut = 1; cut < full.size(); ++cut) {
        for (const std::string& junk : {std::string(), std::string(" ??? <x>")}) {
            OutputParser p(opts(false, true));
            std::vector<OutputEvent> ev;
            p.feed(full.substr(0, cut) + junk, ev);
            p.finish(ev);
            std::string args;
            int begun = 0, ended = 0;
            for (const auto& e : ev) {
                if (e.kind == Kind::ToolArguments) args += e.text;
                begun += e.kind == Kind::ToolCallBegin;
                ended += e.kind == Kind::ToolCallEnd;
            }
            EXPECT_EQ(begun, ended) << cut;
            if (begun) {
                const auto j = ojson::parse(args, nullptr, false);
                EXPECT_TRUE(!j.is_discarded() && j.is_object()) << cut << ": " << args;
            }
        }
    }
}

TEST(GlmOutputParser, StreamingEqualsWholeParseAtEverySplit) {
    std::vector<std::pair<std::string, OutputParserOptions>> texts;
    for (const auto& g : goldens()) texts.push_back({g.text, g.opt});
    texts.push_back({"réflexion 🙂 longue</think>Ciao «mondo» 日本語 \n\n<tool_call>mixed" + kv("s", "🙂é日") +
                         kv("o", "{\"k\": \"日\"}") + "</tool_call>",
                     opts(true, true)});
    for (const auto& [text, opt] : texts) {
        const StreamRun whole = run_chunks(text, opt, {});
        for (size_t cut = 1; cut < text.size(); ++cut) expect_same(whole, run_chunks(text, opt, {cut}), "cut " + std::to_string(cut));
        std::vector<size_t> every;
        for (size_t i = 1; i < text.size(); ++i) every.push_back(i);
        expect_same(whole, run_chunks(text, opt, every), "byte by byte: " + text);
        std::mt19937 rng(uint32_t(text.size()));
        for (int trial = 0; trial < 20; ++trial) {
            std::vector<size_t> cuts;
            for (size_t i = 1; i < text.size(); ++i)
                if (rng() % 4 == 0) cuts.push_back(i);
            expect_same(whole, run_chunks(text, opt, cuts), "random cuts");
        }
    }
}

// A string argument streams as it comes (a client sees a long file's text before its end).
TEST(GlmOutputParser, StringValuesStream) {
    OutputParser p(opts(false, true));
    std::vector<OutputEvent> ev;
    p.feed("<tool_call>get_time<arg_key>city</arg_key><arg_value>Par", ev);
    std::string args;
    for (const auto& e : ev)
        if (e.kind == Kind::ToolArguments) args += e.text;
    EXPECT_EQ(args, "{\"city\": \"Par");
    p.feed("is</arg_v", ev);  // a partial close tag is held back
    args.clear();
    for (const auto& e : ev)
        if (e.kind == Kind::ToolArguments) args += e.text;
    EXPECT_EQ(args, "{\"city\": \"Paris");
}

// Exact replay (spec/PRODUCT.md §4.7): the canonical text of calls parses back to them; with the
// schemas always, without them whenever no string value reads as another JSON value.
TEST(GlmOutputParser, CanonicalCallsParseBack) {
    std::mt19937 rng(20260801);
    auto pick = [&](int n) { return int(rng() % uint32_t(n)); };
    const std::vector<std::string> words = {"Rome", "a b", "«é»", "日本", "🙂", "x<y>&z", "line\nbreak", "tab\t", "\"q\"", "\\"};
    const std::vector<std::string> ambiguous = {"42", "true", "null", "[1]", "{}", "-0.5"};
    for (int c = 0; c < 300; ++c) {
        std::vector<ToolCall> calls;
        bool has_ambiguous = false;
        for (int k = pick(3) + 1; k > 0; --k) {
            ojson args = ojson::object();
            for (int i = pick(4); i > 0; --i) {
                switch (pick(6)) {
                    case 0: {
                        const bool amb = pick(4) == 0;
                        has_ambiguous |= amb;
                        args["s"] = amb ? ambiguous[size_t(pick(int(ambiguous.size())))] : words[size_t(pick(int(words.size())))];
                        break;
                    }
                    case 1: args["n"] = pick(2000) - 1000; break;
                    case 2: args["b"] = pick(2) == 0; break;
                    case 3: args["o"] = {{"k", words[size_t(pick(int(words.size())))]}, {"v", ojson::array({1, nullptr})}}; break;
                    case 4: args["a"] = ojson::array({pick(9), words[size_t(pick(int(words.size())))]}); break;
                    default: args["n"] = double(pick(64)) / 4.0 + 0.25; break;
                }
            }
            calls.push_back({.id = {}, .name = "mixed", .arguments = args.dump()});
        }
        const std::string text = render_tool_calls(calls);
        for (bool schemas : {true, false}) {
            if (!schemas && has_ambiguous) continue;
            const ParsedOutput r = parse_output(text, opts(false, true, schemas));
            SCOPED_TRACE(text);
            EXPECT_TRUE(r.content.empty());
            EXPECT_FALSE(r.malformed);
            EXPECT_EQ(r.raw_block, text);
            ASSERT_EQ(r.tool_calls.size(), calls.size());
            for (size_t i = 0; i < calls.size(); ++i) {
                EXPECT_EQ(r.tool_calls[i].name, calls[i].name);
                EXPECT_EQ(ojson::parse(r.tool_calls[i].arguments), ojson::parse(calls[i].arguments));
            }
        }
    }
    // Why the schemas matter: a string that reads as a number.
    const std::string text = render_tool_calls({{.id = {}, .name = "mixed", .arguments = R"({"s": "42"})"}});
    EXPECT_EQ(ojson::parse(parse_output(text, opts(false, true)).tool_calls.at(0).arguments), ojson::parse(R"({"s": "42"})"));
    EXPECT_EQ(ojson::parse(parse_output(text, opts(false, true, false)).tool_calls.at(0).arguments), ojson::parse(R"({"s": 42})"));
}

TEST(GlmOutputParser, SchemasOfToolsArray) {
    const auto s = OutputParser::schemas_of(kTools);
    using K = OutputParser::ValueKind;
    EXPECT_EQ(s.at("special_function").at("arg1"), K::Json);
    EXPECT_EQ(s.at("get_time").at("city"), K::String);
    EXPECT_EQ(s.at("mixed").at("sn"), K::String);
    EXPECT_EQ(s.at("mixed").at("ei"), K::Json);
    EXPECT_EQ(s.at("mixed").at("any"), K::String);
    EXPECT_EQ(s.at("mixed").at("int_or_null"), K::Json);
    EXPECT_EQ(s.at("mixed").at("free"), K::Untyped);
    EXPECT_TRUE(OutputParser::schemas_of("not json").empty());
    EXPECT_TRUE(OutputParser::schemas_of("{}").empty());
}

}  // namespace
}  // namespace ds4::chat::glm
