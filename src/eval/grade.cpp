#include "eval/grade.h"

#include <cctype>
#include <cstdio>
#include <regex>

#include "eval/line_spec.h"

namespace ds4::eval {
namespace {

std::string_view trim(std::string_view s) {
    while (!s.empty() && std::isspace((unsigned char)s.front())) s.remove_prefix(1);
    while (!s.empty() && std::isspace((unsigned char)s.back())) s.remove_suffix(1);
    return s;
}

bool strip_wrap(std::string_view& s, std::string_view open, std::string_view close) {
    if (s.size() >= open.size() + close.size() && s.substr(0, open.size()) == open &&
        s.substr(s.size() - close.size()) == close) {
        s = trim(s.substr(open.size(), s.size() - open.size() - close.size()));
        return true;
    }
    return false;
}

// X of the final line "Answer: X", or nullopt.
std::optional<std::string> final_answer(std::string_view output, bool thinking) {
    if (thinking) {
        const size_t close = output.rfind("</think>");
        if (close == std::string_view::npos) return std::nullopt;
        output.remove_prefix(close + 8);
    }
    output = trim(output);
    const size_t nl = output.rfind('\n');
    std::string line(trim(nl == std::string_view::npos ? output : output.substr(nl + 1)));
    for (size_t at; (at = line.find("**")) != std::string::npos;) line.erase(at, 2);
    std::string_view l = trim(line);
    if (l.size() < 6) return std::nullopt;
    std::string head(l.substr(0, 6));
    for (char& ch : head) ch = char(std::tolower((unsigned char)ch));
    if (head != "answer") return std::nullopt;
    l = trim(l.substr(6));
    if (l.empty() || l.front() != ':') return std::nullopt;
    l = trim(l.substr(1));
    for (bool again = true; again;) {
        again = false;
        if (!l.empty() && l.back() == '.') {
            l = trim(l.substr(0, l.size() - 1));
            again = true;
        }
        again = strip_wrap(l, "$", "$") || strip_wrap(l, "\\boxed{", "}") || strip_wrap(l, "`", "`") || again;
    }
    if (l.empty()) return std::nullopt;
    return std::string(l);
}

std::string integer_answer(std::string_view v) {
    std::string s(v);
    static const std::regex grouped(R"([+-]?\d{1,3}(,\d{3})+)");
    if (std::regex_match(s, grouped)) std::erase(s, ',');
    static const std::regex plain(R"([+-]?\d+)");
    if (!std::regex_match(s, plain)) return "?";
    bool neg = s[0] == '-';
    if (s[0] == '-' || s[0] == '+') s.erase(0, 1);
    const size_t nz = s.find_first_not_of('0');
    s = nz == std::string::npos ? "0" : s.substr(nz);
    if (s == "0") neg = false;
    return neg ? "-" + s : s;
}

std::string choice_answer(std::string_view v, size_t n) {
    static const std::regex re(R"(\(?([A-Z])\)?(?:[.:)]\s*.*|\s+.*)?)");
    std::string s(v);
    std::smatch m;
    char letter = 0;
    if (s.size() == 1 && std::isalpha((unsigned char)s[0])) letter = char(std::toupper((unsigned char)s[0]));
    else if (std::regex_match(s, m, re)) letter = m[1].str()[0];
    if (letter < 'A' || letter >= char('A' + n)) return "?";
    return std::string(1, letter);
}

std::string lines_answer(std::string_view v) {
    const auto set = parse_line_spec(v);
    if (!set) return "?";
    std::string out;
    for (long l : *set) {
        if (!out.empty()) out += ',';
        out += std::to_string(l);
    }
    return out;
}

}  // namespace

std::string extract(const Case& c, std::string_view output, bool thinking) {
    const auto v = final_answer(output, thinking);
    if (!v) return "?";
    switch (c.kind) {
        case AnswerKind::Integer: return integer_answer(*v);
        case AnswerKind::Choice: return choice_answer(*v, c.choices.size());
        case AnswerKind::Lines: return lines_answer(*v);
        case AnswerKind::Exact:
        case AnswerKind::Regex: return *v;
    }
    return "?";
}

bool matches(const Case& c, std::string_view got) {
    if (got.empty() || got == "?") return false;
    switch (c.kind) {
        case AnswerKind::Integer: return got == integer_answer(c.expected);
        case AnswerKind::Choice: return got == c.expected;
        case AnswerKind::Exact: return got == trim(c.expected);
        case AnswerKind::Regex:
            try {
                return std::regex_match(std::string(got), std::regex(c.expected, std::regex::ECMAScript));
            } catch (const std::regex_error&) {
                return false;
            }
        case AnswerKind::Lines: {
            const auto want = parse_line_spec(c.expected), have = parse_line_spec(got);
            if (!want || !have) return false;
            for (long l : *have)
                if (!want->count(l)) return false;
            return true;
        }
    }
    return false;
}

int self_test() {
    struct T {
        AnswerKind kind;
        const char* expected;
        bool thinking;
        const char* output;
        const char* got;
        bool pass;
    };
    const T tests[] = {
        {AnswerKind::Integer, "42", false, "6 times 7.\nAnswer: 42", "42", true},
        {AnswerKind::Integer, "42", false, "Answer: 042.", "42", true},
        {AnswerKind::Integer, "1234", false, "**Answer:** $1,234$", "1234", true},
        {AnswerKind::Integer, "7", false, "Answer: \\boxed{7}", "7", true},
        {AnswerKind::Integer, "-3", false, "answer: -3", "-3", true},
        {AnswerKind::Integer, "42", false, "Answer: 42\nI hope that helps.", "?", false},
        {AnswerKind::Integer, "42", false, "The answer is 42.", "?", false},
        {AnswerKind::Integer, "42", false, "Answer: 41 or 42", "?", false},
        {AnswerKind::Integer, "42", true, "maybe Answer: 42", "?", false},
        {AnswerKind::Integer, "42", true, "Answer: 40</think>Checked.\nAnswer: 42\n", "42", true},
        {AnswerKind::Integer, "42", true, "</think>x</think>\nAnswer: 43", "43", false},
        {AnswerKind::Choice, "B", false, "So B.\nAnswer: B", "B", true},
        {AnswerKind::Choice, "B", false, "Answer: (B)", "B", true},
        {AnswerKind::Choice, "B", false, "Answer: B) the second", "B", true},
        {AnswerKind::Choice, "B", false, "Answer: b", "B", true},
        {AnswerKind::Choice, "B", false, "Answer: E", "?", false},
        {AnswerKind::Choice, "B", false, "Answer: a lot of thought", "?", false},
        {AnswerKind::Choice, "B", false, "Answer: C", "C", false},
        {AnswerKind::Exact, "blue", false, "Answer: blue.", "blue", true},
        {AnswerKind::Exact, "blue", false, "Answer: Blue", "Blue", false},
        {AnswerKind::Regex, "(?:0x)?[Ff]{2}", false, "Answer: `0xff`", "0xff", true},
        {AnswerKind::Regex, "(?:0x)?[Ff]{2}", false, "Answer: 0xfff", "0xfff", false},
        {AnswerKind::Regex, "(?:0x)?[Ff]{2}", false, "Answer: 0xFF", "0xFF", true},
        {AnswerKind::Lines, "9", false, "Answer: line 9", "9", true},
        {AnswerKind::Lines, "20-22", false, "Answer: 21, 22", "21,22", true},
        {AnswerKind::Lines, "20-22", false, "Answer: 19-20", "19,20", false},
        {AnswerKind::Lines, "9", false, "Answer: none", "?", false},
    };
    int failed = 0;
    for (const T& t : tests) {
        Case c{.id = "self-test", .suite = "self-test", .prompt = "?", .kind = t.kind, .expected = t.expected};
        if (t.kind == AnswerKind::Choice) c.choices = {"a", "b", "c", "d"};
        const std::string got = extract(c, t.output, t.thinking);
        const bool pass = matches(c, got);
        if (got != t.got || pass != t.pass) {
            std::fprintf(stderr, "ds4-eval: extractor self-test failed: %s key %s on \"%s\": got %s (%s), want %s (%s)\n",
                         to_string(t.kind), t.expected, t.output, got.c_str(), pass ? "pass" : "fail", t.got,
                         t.pass ? "pass" : "fail");
            ++failed;
        }
    }
    return failed;
}

}  // namespace ds4::eval
