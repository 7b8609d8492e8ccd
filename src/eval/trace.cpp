#include "eval/trace.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/error.h"
#include "eval/grade.h"

namespace ds4::eval {
namespace {

void block(std::FILE* f, const char* label, const std::string& text) {
    std::fprintf(f, "%s_BEGIN bytes=%zu\n", label, text.size());
    std::fwrite(text.data(), 1, text.size(), f);
    std::fprintf(f, "\n%s_END\n", label);
}

}  // namespace

TraceWriter::TraceWriter(const std::string& path, const std::vector<std::pair<std::string, std::string>>& header)
    : f_(std::fopen(path.c_str(), "wb")) {
    if (!f_) fail("--trace {}: {}", path, std::strerror(errno));
    std::fprintf(f_, "# ds4-eval trace v1\nstarted_unix: %lld\n", (long long)std::time(nullptr));
    for (const auto& [k, v] : header) std::fprintf(f_, "%s: %s\n", k.c_str(), v.c_str());
    std::fputc('\n', f_);
    std::fflush(f_);
}

TraceWriter::~TraceWriter() { std::fclose(f_); }

void TraceWriter::write(int index, int total, const Case& c, const Outcome& o, const std::string& system) {
    std::fprintf(f_, "===== CASE %d/%d %s/%s =====\n", index + 1, total, c.suite.c_str(), c.id.c_str());
    std::fprintf(f_, "suite: %s\nid: %s\nstatus: %s\npicked: %s\nexpected: %s\nkind: %s\n", c.suite.c_str(),
                 c.id.c_str(), to_string(o.status), o.picked.c_str(), c.expected.c_str(), to_string(c.kind));
    if (!c.choices.empty()) std::fprintf(f_, "choices: %s\n", nlohmann::json(c.choices).dump().c_str());
    std::fprintf(f_, "thinking: %s\nprompt_tokens: %lld\ngenerated_tokens: %lld\nelapsed_sec: %.3f\nstop: %s\n",
                 o.thinking ? "yes" : "no", (long long)o.prompt_tokens, (long long)o.generated, o.seconds,
                 engine::to_string(o.stop));
    std::fprintf(f_, "think_close: %s\n", to_string(o.close.kind));
    if (o.close.kind != CloseKind::None)
        std::fprintf(f_, "think_close_token_index: %lld\nthink_close_remaining_budget: %lld\nthink_close_rank: %d\n",
                     (long long)o.close.token_index, (long long)o.close.remaining, o.close.rank);
    if (!o.error.empty()) std::fprintf(f_, "error: %s\n", o.error.c_str());
    block(f_, "SYSTEM_PROMPT", system);
    block(f_, "QUESTION_PROMPT", o.question);
    block(f_, "MODEL_OUTPUT", o.output);
    std::fputc('\n', f_);
    std::fflush(f_);
}

namespace {

// The next line of `text` from `at` (without its newline); moves `at` past it.
std::string_view next_line(std::string_view text, size_t& at) {
    const size_t nl = text.find('\n', at);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view l = text.substr(at, end - at);
    at = nl == std::string_view::npos ? text.size() : nl + 1;
    return l;
}

// A block whose BEGIN line was `line`: its bytes, `at` moved past its END line.
std::string read_block(std::string_view text, size_t& at, std::string_view line, int line_no) {
    const size_t label_end = line.find("_BEGIN bytes=");
    const std::string label(line.substr(0, label_end));
    const std::string n_text(line.substr(label_end + 13));
    char* end = nullptr;
    const unsigned long long n = std::strtoull(n_text.c_str(), &end, 10);
    if (n_text.empty() || *end || n > text.size() - at) fail("trace line {}: a bad {} block length", line_no, label);
    std::string bytes(text.substr(at, size_t(n)));
    at += size_t(n);
    if (at < text.size() && text[at] == '\n') ++at;
    if (next_line(text, at) != label + "_END") fail("trace line {}: the {} block does not end with {}_END", line_no, label, label);
    return bytes;
}

void finish_case(TraceCase& t, int line_no) {
    const auto get = [&](const char* k) {
        auto it = t.fields.find(k);
        if (it == t.fields.end()) fail("trace case ending before line {}: no \"{}\" line", line_no, k);
        return it->second;
    };
    t.c.id = get("id");
    t.c.suite = get("suite");
    t.c.expected = get("expected");
    const auto kind = parse_kind(get("kind"));
    if (!kind) fail("trace case {}: unknown kind {}", t.c.id, get("kind"));
    t.c.kind = *kind;
    if (t.fields.count("choices")) t.c.choices = nlohmann::json::parse(t.fields["choices"]).get<std::vector<std::string>>();
    t.status = t.fields.count("status") ? t.fields["status"] : "";
    t.picked = t.fields.count("picked") ? t.fields["picked"] : "";
    t.thinking = t.fields.count("thinking") && t.fields["thinking"] == "yes";
}

}  // namespace

std::vector<TraceCase> parse_trace(std::string_view text) {
    std::vector<TraceCase> out;
    size_t at = 0;
    int line_no = 0;
    TraceCase* cur = nullptr;
    try {
        while (at < text.size()) {
            const std::string_view line = next_line(text, at);
            ++line_no;
            if (line.rfind("===== CASE ", 0) == 0) {
                if (cur) finish_case(*cur, line_no);
                cur = &out.emplace_back();
            } else if (cur && line.find("_BEGIN bytes=") != std::string_view::npos) {
                const std::string bytes = read_block(text, at, line, line_no);
                for (char ch : bytes) line_no += ch == '\n';
                line_no += 2;
                if (line.rfind("MODEL_OUTPUT_", 0) == 0) cur->output = bytes;
                if (line.rfind("QUESTION_PROMPT_", 0) == 0) cur->c.prompt = bytes;
            } else if (cur) {
                const size_t colon = line.find(": ");
                if (colon != std::string_view::npos) cur->fields[std::string(line.substr(0, colon))] = std::string(line.substr(colon + 2));
            }
        }
        if (cur) finish_case(*cur, line_no);
    } catch (const nlohmann::json::exception& e) {
        fail("trace line {}: {}", line_no, e.what());
    }
    return out;
}

RegradeSummary regrade(const std::vector<TraceCase>& traced, const std::vector<Case>& cases, std::FILE* out) {
    RegradeSummary s;
    for (const TraceCase& t : traced) {
        ++s.total;
        if (t.status != "PASSED" && t.status != "FAILED") {
            ++s.not_graded;
            continue;
        }
        Case key = t.c;
        for (const Case& c : cases)
            if (c.suite == t.c.suite && c.id == t.c.id) key = c;
        const std::string got = extract(key, t.output, t.thinking);
        const bool ok = matches(key, got);
        (ok ? s.passed : s.failed)++;
        if (ok != (t.status == "PASSED") || got != t.picked) {
            ++s.changed;
            std::fprintf(out, "%s/%s: trace %s picked=%s -> regrade %s picked=%s expected=%s\n", t.c.suite.c_str(),
                         t.c.id.c_str(), t.status.c_str(), t.picked.c_str(), ok ? "PASSED" : "FAILED", got.c_str(),
                         key.expected.c_str());
        }
    }
    std::fprintf(out, "ds4-eval: regraded %d cases: passed=%d failed=%d changed=%d not_graded=%d\n", s.total, s.passed,
                 s.failed, s.changed, s.not_graded);
    return s;
}

}  // namespace ds4::eval
