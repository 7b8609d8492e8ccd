#include "eval/cases.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <regex>
#include <set>

#include "common/error.h"
#include "common/file_io.h"
#include "eval/line_spec.h"

namespace ds4::eval {

const char* to_string(AnswerKind k) {
    switch (k) {
        case AnswerKind::Integer: return "integer";
        case AnswerKind::Choice: return "choice";
        case AnswerKind::Exact: return "exact";
        case AnswerKind::Regex: return "regex";
        case AnswerKind::Lines: return "lines";
    }
    return "?";
}

std::optional<AnswerKind> parse_kind(std::string_view s) {
    for (AnswerKind k : {AnswerKind::Integer, AnswerKind::Choice, AnswerKind::Exact, AnswerKind::Regex, AnswerKind::Lines})
        if (s == to_string(k)) return k;
    return std::nullopt;
}

namespace {

bool is_integer(std::string_view s) {
    if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
    return !s.empty() && std::all_of(s.begin(), s.end(), [](unsigned char ch) { return std::isdigit(ch); });
}

std::string unescape_tsv(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] != '\\' || i + 1 == s.size()) {
            out += s[i];
            continue;
        }
        const char n = s[++i];
        out += n == 'n' ? '\n' : n == 't' ? '\t' : n;
    }
    return out;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
    std::vector<std::string_view> out;
    size_t at = 0;
    for (size_t i = 0; i <= s.size(); ++i)
        if (i == s.size() || s[i] == sep) {
            out.push_back(s.substr(at, i - at));
            at = i + 1;
        }
    return out;
}

Case from_json(const nlohmann::json& j) {
    if (!j.is_object()) fail("not a JSON object");
    Case c;
    const auto str = [&](const char* key, bool required) {
        if (!j.contains(key)) {
            if (required) fail("missing \"{}\"", key);
            return std::string();
        }
        const auto& v = j.at(key);
        if (v.is_number_integer()) return std::to_string(v.get<long long>());
        if (!v.is_string()) fail("\"{}\" must be a string", key);
        return v.get<std::string>();
    };
    c.id = str("id", true);
    c.suite = str("suite", false);
    if (c.suite.empty()) c.suite = "custom";
    c.prompt = str("prompt", true);
    const std::string kind = str("kind", true);
    const auto k = parse_kind(kind);
    if (!k) fail("unknown kind \"{}\" (integer, choice, exact, regex, lines)", kind);
    c.kind = *k;
    c.expected = str("expected", true);
    if (j.contains("choices")) {
        if (!j.at("choices").is_array()) fail("\"choices\" must be an array of strings");
        for (const auto& e : j.at("choices")) {
            if (!e.is_string()) fail("\"choices\" must be an array of strings");
            c.choices.push_back(e.get<std::string>());
        }
    }
    return c;
}

Case from_tsv(std::string_view line) {
    const auto f = split(line, '\t');
    if (f.size() < 5 || f.size() > 6) fail("a TSV case has 5 or 6 tab-separated fields (id, suite, kind, expected, prompt[, choices=...]), not {}", f.size());
    Case c{.id = std::string(f[0]), .suite = std::string(f[1]), .prompt = unescape_tsv(f[4]), .expected = std::string(f[3])};
    const auto k = parse_kind(f[2]);
    if (!k) fail("unknown kind \"{}\" (integer, choice, exact, regex, lines)", f[2]);
    c.kind = *k;
    if (f.size() == 6) {
        std::string_view ch = f[5];
        if (ch.rfind("choices=", 0) != 0) fail("the sixth TSV field must start with choices=");
        for (auto e : split(ch.substr(8), '|')) c.choices.push_back(unescape_tsv(e));
    }
    return c;
}

}  // namespace

std::string validate(const Case& c) {
    if (c.id.empty()) return "empty id";
    if (c.suite.empty()) return "empty suite";
    if (c.prompt.empty()) return "empty prompt";
    switch (c.kind) {
        case AnswerKind::Integer:
            if (!is_integer(c.expected)) return "the expected integer \"" + c.expected + "\" is not an integer";
            break;
        case AnswerKind::Choice:
            if (c.choices.size() < 2 || c.choices.size() > 26) return "a choice case needs 2 to 26 choices";
            if (c.expected.size() != 1 || c.expected[0] < 'A' || c.expected[0] >= char('A' + c.choices.size()))
                return "the expected choice \"" + c.expected + "\" is not one of its letters";
            break;
        case AnswerKind::Exact:
            if (c.expected.empty()) return "empty expected text";
            break;
        case AnswerKind::Regex:
            try {
                std::regex re(c.expected, std::regex::ECMAScript);
            } catch (const std::regex_error& e) {
                return "the expected regex does not compile: " + std::string(e.what());
            }
            break;
        case AnswerKind::Lines:
            if (!parse_line_spec(c.expected)) return "the expected line spec \"" + c.expected + "\" does not parse";
            break;
    }
    if (c.kind != AnswerKind::Choice && !c.choices.empty()) return "only choice cases have choices";
    return "";
}

std::vector<Case> parse_cases(std::string_view text, const std::string& name) {
    std::vector<Case> out;
    std::set<std::string> ids;
    int line_no = 0;
    std::optional<bool> jsonl;
    for (std::string_view line : split(text, '\n')) {
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        const size_t first = line.find_first_not_of(" \t");
        if (first == std::string_view::npos || line[first] == '#') continue;
        if (!jsonl) jsonl = line[first] == '{';
        try {
            Case c = *jsonl ? from_json(nlohmann::json::parse(line)) : from_tsv(line);
            if (const std::string why = validate(c); !why.empty()) fail("{}", why);
            if (!ids.insert(c.id).second) fail("duplicate id \"{}\"", c.id);
            out.push_back(std::move(c));
        } catch (const nlohmann::json::exception& e) {
            fail("{}:{}: not JSON: {}", name, line_no, e.what());
        } catch (const Error& e) {
            fail("{}:{}: {}", name, line_no, e.what());
        }
    }
    if (out.empty()) fail("{}: no cases", name);
    return out;
}

std::vector<Case> load_cases(const std::string& path) { return parse_cases(read_file(path), path); }

std::string question_text(const Case& c) {
    std::string q = c.prompt;
    if (!q.empty() && q.back() != '\n') q += '\n';
    const char* format = "<integer>";
    if (c.kind == AnswerKind::Choice) {
        q += "\nChoices:\n";
        for (size_t i = 0; i < c.choices.size(); ++i) q += std::string(1, char('A' + i)) + ". " + c.choices[i] + "\n";
        format = "<letter>";
    } else if (c.kind == AnswerKind::Lines) {
        format = "<line number, or comma-separated line numbers>";
    } else if (c.kind == AnswerKind::Exact || c.kind == AnswerKind::Regex) {
        format = "<answer>";
    }
    return q + "\nWork it out, then end your reply with exactly one line of the form\nAnswer: " + format +
           "\nand write nothing after that line.";
}

std::vector<std::string> suites(const std::vector<Case>& all) {
    std::vector<std::string> out;
    for (const Case& c : all)
        if (std::find(out.begin(), out.end(), c.suite) == out.end()) out.push_back(c.suite);
    return out;
}

std::vector<Case> select(const std::vector<Case>& all, const Selection& s) {
    std::vector<Case> pool;
    if (s.suite.empty() || s.suite == "all") {
        pool = all;
    } else {
        for (const Case& c : all)
            if (c.suite == s.suite) pool.push_back(c);
        if (pool.empty()) {
            std::string known;
            for (const auto& n : suites(all)) {
                if (!known.empty()) known += ", ";
                known += n;
            }
            fail("--suite {}: no such suite (the cases have: {}, or all)", s.suite, known);
        }
    }
    if (!s.ids.empty()) {
        std::vector<Case> kept;
        for (const std::string& id : s.ids) {
            auto it = std::find_if(pool.begin(), pool.end(), [&](const Case& c) { return c.id == id; });
            if (it == pool.end()) fail("--case-id {}: no such case in the selected suite", id);
            kept.push_back(*it);
        }
        pool = std::move(kept);
    }
    if (!s.sequence.empty()) {
        std::vector<Case> seq;
        for (std::string_view item : split(s.sequence, ',')) {
            while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
            while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
            const std::string v(item);
            char* end = nullptr;
            errno = 0;
            const long n = std::strtol(v.c_str(), &end, 10);
            if (v.empty() || *end || errno || n < 1 || n > long(pool.size()))
                fail("--case-sequence: \"{}\" is not a case number in 1..{}", v, pool.size());
            seq.push_back(pool[size_t(n - 1)]);
        }
        pool = std::move(seq);
    }
    if (s.questions > 0 && size_t(s.questions) < pool.size()) pool.resize(size_t(s.questions));
    return pool;
}

}  // namespace ds4::eval
