// ds4-eval's questions (docs/EVAL.md, "Case files"): what one case asks, how its answer is
// graded, the built-in set written for this project, and the JSONL / TSV files users point
// --cases at. Every case ends its prompt with an instruction to put the answer on one final
// line ("Answer: ..."), which the strict extractors (eval/grade.h) read.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ds4::eval {

// How a case's answer is read and compared (eval/grade.h has the rules).
enum class AnswerKind {
    Integer,  // an integer; leading zeros, a sign "+" and thousands commas are normalised
    Choice,   // one letter of the case's choices (A, B, ...)
    Exact,    // the text, trimmed, equal byte for byte
    Regex,    // the text matches `expected` (ECMAScript) as a whole
    Lines,    // line numbers: every one given is in `expected`'s set ("9", "3,7", "20-22")
};
const char* to_string(AnswerKind k);
std::optional<AnswerKind> parse_kind(std::string_view s);

struct Case {
    std::string id{};      // unique within the set
    std::string suite{};   // the group --suite selects
    std::string prompt{};  // the question itself (choices and the answer instruction are added)
    AnswerKind kind = AnswerKind::Integer;
    std::string expected{};  // the key, in the kind's syntax
    std::vector<std::string> choices{};  // Choice: the options, shown as A., B., ...
};

// The cases this project ships (arithmetic, logic, code reading), written for it: suites
// "arith", "logic", "code".
const std::vector<Case>& builtin_cases();

// Reads a case file: JSON Lines (one object per line: id, suite, prompt, kind, expected,
// choices) or, for a file whose first non-blank line is not a JSON object, TSV (id, suite,
// kind, expected, prompt; "\n", "\t" and "\\" escaped in the prompt; choices as
// "choices=A text|B text" in a sixth column). Blank lines and lines starting with '#' are
// skipped. Throws ds4::Error naming the file and line for anything malformed or a
// duplicate id (validate() runs on every case).
std::vector<Case> load_cases(const std::string& path);
std::vector<Case> parse_cases(std::string_view text, const std::string& name);

// The first problem of a case ("" when it is fine): an empty id, suite or prompt, a choice
// case with fewer than 2 or more than 26 choices or a key outside them, an integer key that
// is not an integer, a regex that does not compile, a line spec that does not parse.
std::string validate(const Case& c);

// The question as the model sees it: the prompt, the lettered choices, and the instruction to
// end with exactly one line "Answer: <...>" in the kind's format.
std::string question_text(const Case& c);

// What --suite, --case-id, --questions and --case-sequence pick, in run order. suite "all" (or
// empty) keeps every case; ids (when given) keep only those; sequence is upstream's
// comma-separated 1-based indexes into what is left (repeats allowed); questions > 0 keeps
// the first N of the result. Throws ds4::Error for an unknown suite or id, or a bad sequence.
struct Selection {
    std::string suite{};
    std::vector<std::string> ids{};
    std::string sequence{};
    int questions = 0;
};
std::vector<Case> select(const std::vector<Case>& all, const Selection& s);

// The suites of `all`, in first-seen order.
std::vector<std::string> suites(const std::vector<Case>& all);

}  // namespace ds4::eval
