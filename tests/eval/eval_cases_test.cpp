// ds4-eval's core without a model: case files (JSONL, TSV, their errors), the selection flags,
// the strict final-line extractors and grading, and the trace written, read back byte for byte
// and regraded.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "common/error.h"
#include "common/file_io.h"
#include "eval/cases.h"
#include "eval/grade.h"
#include "eval/report.h"
#include "eval/trace.h"
#include "support/tool_run.h"

namespace ds4::eval {
namespace {

std::string error_of(const std::string& text) {
    try {
        parse_cases(text, "t.jsonl");
    } catch (const Error& e) {
        return e.what();
    }
    return "";
}

TEST(EvalCases, ParsesJsonlAndTsv) {
    const auto j = parse_cases(
        "# a comment\n"
        "{\"id\":\"a\",\"suite\":\"s\",\"prompt\":\"1+1?\",\"kind\":\"integer\",\"expected\":\"2\"}\n\n"
        "{\"id\":\"b\",\"prompt\":\"pick\",\"kind\":\"choice\",\"expected\":\"B\",\"choices\":[\"x\",\"y\"]}\n",
        "t.jsonl");
    ASSERT_EQ(j.size(), 2u);
    EXPECT_EQ(j[0].kind, AnswerKind::Integer);
    EXPECT_EQ(j[1].suite, "custom");
    EXPECT_EQ(j[1].choices, (std::vector<std::string>{"x", "y"}));
    const auto t = parse_cases("id1\tmath\tlines\t3-4\tline one\\nline two\\tx\nid2\tm\tchoice\tA\tq\tchoices=yes|no\n", "t.tsv");
    ASSERT_EQ(t.size(), 2u);
    EXPECT_EQ(t[0].prompt, "line one\nline two\tx");
    EXPECT_EQ(t[0].kind, AnswerKind::Lines);
    EXPECT_EQ(t[1].choices, (std::vector<std::string>{"yes", "no"}));
}

TEST(EvalCases, RefusesMalformedCasesNamingTheLine) {
    EXPECT_NE(error_of("{\"id\":\"a\",\"prompt\":\"p\",\"kind\":\"integer\",\"expected\":\"two\"}").find("t.jsonl:1"), std::string::npos);
    EXPECT_NE(error_of("\n{\"id\":\"a\",\"prompt\":\"p\",\"kind\":\"float\",\"expected\":\"2\"}").find("t.jsonl:2: unknown kind"),
              std::string::npos);
    EXPECT_NE(error_of("{\"id\":\"a\",\"prompt\":\"p\",\"kind\":\"choice\",\"expected\":\"C\",\"choices\":[\"x\",\"y\"]}")
                  .find("not one of its letters"), std::string::npos);
    EXPECT_NE(error_of("{\"id\":\"a\",\"prompt\":\"p\",\"kind\":\"regex\",\"expected\":\"(\"}").find("does not compile"),
              std::string::npos);
    const std::string ok = "{\"id\":\"a\",\"prompt\":\"p\",\"kind\":\"integer\",\"expected\":\"2\"}\n";
    EXPECT_NE(error_of(ok + ok).find("duplicate id"), std::string::npos);
    EXPECT_NE(error_of("{\"id\":\"a\",").find("not JSON"), std::string::npos);
    EXPECT_NE(error_of("# nothing\n").find("no cases"), std::string::npos);
}

TEST(EvalCases, BuiltinCasesAreValidAndTheirKeysGradeAsRight) {
    const auto& all = builtin_cases();
    ASSERT_GE(all.size(), 15u);
    EXPECT_EQ(suites(all), (std::vector<std::string>{"arith", "logic", "code"}));
    for (const Case& c : all) {
        EXPECT_EQ(validate(c), "") << c.id;
        // A reply whose final line is the key passes; the regex key's own text is a pattern.
        const std::string key = c.kind == AnswerKind::Regex ? "a-b-c" : c.expected;
        EXPECT_TRUE(matches(c, extract(c, "Reasoning.\nAnswer: " + key, false))) << c.id;
        EXPECT_FALSE(matches(c, extract(c, "Answer: " + key + "\nbut maybe not", false))) << c.id;
        EXPECT_NE(question_text(c).find("Answer: <"), std::string::npos) << c.id;
    }
}

TEST(EvalCases, SelectionBySuiteIdsSequenceAndCount) {
    const auto& all = builtin_cases();
    const auto code = select(all, {.suite = "code"});
    for (const Case& c : code) EXPECT_EQ(c.suite, "code");
    EXPECT_EQ(select(all, {.suite = "all", .questions = 4}).size(), 4u);
    const auto seq = select(all, {.suite = "code", .sequence = "3, 1,3"});
    ASSERT_EQ(seq.size(), 3u);
    EXPECT_EQ(seq[0].id, code[2].id);
    EXPECT_EQ(seq[1].id, code[0].id);
    EXPECT_EQ(seq[2].id, code[2].id);
    const auto ids = select(all, {.ids = {"logic-rain", "arith-journey"}});
    ASSERT_EQ(ids.size(), 2u);
    EXPECT_EQ(ids[0].id, "logic-rain");
    EXPECT_THROW(select(all, {.suite = "nope"}), Error);
    EXPECT_THROW(select(all, {.ids = {"nope"}}), Error);
    EXPECT_THROW(select(all, {.sequence = "0"}), Error);
    EXPECT_THROW(select(all, {.sequence = "1,,2"}), Error);
    EXPECT_THROW(select(all, {.sequence = "99"}), Error);
}

TEST(EvalGrade, SelfTestPassesAndExtractorsAreStrict) {
    EXPECT_EQ(self_test(), 0);
    const Case i{.id = "i", .suite = "s", .prompt = "p", .kind = AnswerKind::Integer, .expected = "12"};
    EXPECT_EQ(extract(i, "Answer: 12", false), "12");
    EXPECT_EQ(extract(i, "Answer: 12", true), "?");  // reasoning never closed
    EXPECT_EQ(extract(i, "Answer: 12\n\n  \n", false), "12");
    EXPECT_EQ(extract(i, "answer 12", false), "?");
    EXPECT_EQ(extract(i, "Answer: twelve", false), "?");
    EXPECT_FALSE(matches(i, "?"));
    const Case l{.id = "l", .suite = "s", .prompt = "p", .kind = AnswerKind::Lines, .expected = "4,7"};
    EXPECT_TRUE(matches(l, extract(l, "Answer: 4", false)));
    EXPECT_TRUE(matches(l, extract(l, "Answer: lines 4 and 7", false)));
    EXPECT_FALSE(matches(l, extract(l, "Answer: 4, 5", false)));
}

Outcome outcome(Status s, const std::string& picked, const std::string& output) {
    Outcome o;
    o.status = s;
    o.picked = picked;
    o.prompt_tokens = 10;
    o.generated = 5;
    o.output = output;
    o.question = "Q?";
    return o;
}

TEST(EvalTrace, RoundTripsOutputsAndRegradesAgainstCorrectedKeys) {
    test::TempDir dir;
    const std::string path = dir.file("t.trace");
    const Case a{.id = "a", .suite = "s", .prompt = "p", .kind = AnswerKind::Integer, .expected = "5"};
    const Case b{.id = "b", .suite = "s", .prompt = "p", .kind = AnswerKind::Choice, .expected = "A", .choices = {"x", "y"}};
    // Output that imitates the trace's own syntax must come back byte for byte.
    const std::string tricky = "x\n===== CASE 9/9 s/zz =====\nMODEL_OUTPUT_END\nstatus: PASSED\nAnswer: 6";
    {
        TraceWriter w(path, {{"model", "m.gguf"}});
        w.write(0, 3, a, outcome(Status::Failed, "6", tricky), "sys");
        w.write(1, 3, b, outcome(Status::Passed, "A", "Answer: A"), "sys");
        w.write(2, 3, a, outcome(Status::Stopped, "?", "Answ"), "sys");
    }
    const auto traced = parse_trace(read_file(path));
    ASSERT_EQ(traced.size(), 3u);
    EXPECT_EQ(traced[0].output, tricky);
    EXPECT_EQ(traced[0].c.expected, "5");
    EXPECT_EQ(traced[1].c.choices, (std::vector<std::string>{"x", "y"}));
    EXPECT_EQ(traced[1].c.prompt, "Q?");
    EXPECT_EQ(traced[2].status, "STOPPED");

    const std::string out = dir.file("out.txt");
    std::FILE* f = std::fopen(out.c_str(), "w");
    auto s = regrade(traced, {}, f);  // the traced keys: nothing changes
    std::fclose(f);
    EXPECT_EQ(s.total, 3);
    EXPECT_EQ(s.passed, 1);
    EXPECT_EQ(s.failed, 1);
    EXPECT_EQ(s.not_graded, 1);
    EXPECT_EQ(s.changed, 0);

    Case fixed = a;
    fixed.expected = "6";  // a corrected key turns case a into a pass
    f = std::fopen(out.c_str(), "w");
    s = regrade(traced, {fixed}, f);
    std::fclose(f);
    EXPECT_EQ(s.passed, 2);
    EXPECT_EQ(s.changed, 1);
    EXPECT_NE(read_file(out).find("s/a: trace FAILED picked=6 -> regrade PASSED picked=6 expected=6"), std::string::npos);
}

TEST(EvalTrace, RefusesATruncatedBlock) {
    EXPECT_THROW(parse_trace("===== CASE 1/1 s/a =====\nid: a\nMODEL_OUTPUT_BEGIN bytes=50\nshort\n"), Error);
    EXPECT_THROW(parse_trace("===== CASE 1/1 s/a =====\nsuite: s\n"), Error);  // no id / kind
}

TEST(EvalReport, TotalsAndJson) {
    const std::vector<Case> cases = {{.id = "a", .suite = "s", .prompt = "p", .kind = AnswerKind::Integer, .expected = "5"},
                                     {.id = "b", .suite = "s", .prompt = "p", .kind = AnswerKind::Integer, .expected = "6"},
                                     {.id = "c", .suite = "s", .prompt = "p", .kind = AnswerKind::Integer, .expected = "7"}};
    const std::vector<Outcome> outs = {outcome(Status::Passed, "5", ""), outcome(Status::Failed, "4", ""), Outcome{}};
    const Totals t = totals(outs);
    EXPECT_EQ(t.passed, 1);
    EXPECT_EQ(t.failed, 1);
    EXPECT_EQ(t.pending, 1);
    EXPECT_EQ(t.prompt_tokens, 20);
    EXPECT_EQ(t.generated, 10);
    const auto j = nlohmann::json::parse(json_report(cases, outs, {{"model", "m"}}));
    EXPECT_EQ(j["run"]["model"], "m");
    EXPECT_EQ(j["cases"][1]["status"], "FAILED");
    EXPECT_EQ(j["cases"][1]["picked"], "4");
    EXPECT_EQ(j["cases"][2]["status"], "PENDING");
    EXPECT_EQ(j["totals"]["passed"], 1);
    EXPECT_EQ(j["totals"]["generated_tokens"], 10);
}

}  // namespace
}  // namespace ds4::eval
