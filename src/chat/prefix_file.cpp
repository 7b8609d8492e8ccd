#include "chat/prefix_file.h"

#include "common/error.h"
#include "common/file_io.h"

namespace ds4::chat {
namespace {

constexpr size_t kMaxPrefixBytes = size_t(64) << 20;

// The role a line opens, and where its text starts; false when it opens none.
bool marker(std::string_view line, Role& role, size_t& text_at) {
    for (const auto& [m, r] : {std::pair<std::string_view, Role>{"USER:", Role::User}, {"ASSISTANT:", Role::Assistant}}) {
        if (line.substr(0, m.size()) != m) continue;
        role = r;
        text_at = m.size() + (line.size() > m.size() && line[m.size()] == ' ' ? 1 : 0);
        return true;
    }
    return false;
}

bool blank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

}  // namespace

std::vector<Message> parse_prefix(std::string_view text, const std::string& name) {
    std::vector<Message> turns;
    size_t line_no = 0;
    for (size_t at = 0; at < text.size();) {
        const size_t nl = text.find('\n', at);
        const size_t end = nl == std::string_view::npos ? text.size() : nl + 1;
        const std::string_view line = text.substr(at, end - at);
        ++line_no;
        at = end;
        Role role;
        size_t text_at = 0;
        if (!marker(line, role, text_at)) {
            if (turns.empty()) {
                if (!blank(line))
                    fail("{}:{}: text before the first turn (turns start with \"USER:\" or \"ASSISTANT:\" "
                         "at the start of a line)", name, line_no);
                continue;
            }
            turns.back().content.append(line);
            continue;
        }
        const Role want = turns.empty() || turns.back().role == Role::Assistant ? Role::User : Role::Assistant;
        if (role != want)
            fail("{}:{}: expected {} turn: USER and ASSISTANT turns alternate, starting with USER", name,
                 line_no, want == Role::User ? "a USER" : "an ASSISTANT");
        turns.push_back({.role = role, .content = std::string(line.substr(text_at))});
    }
    if (turns.empty()) fail("{}: no turn (turns start with \"USER:\" or \"ASSISTANT:\" at the start of a line)", name);
    if (turns.back().role != Role::Assistant)
        fail("{}: the last turn must be the assistant's (an ASSISTANT: turn); the prompt is the next user turn", name);
    for (Message& m : turns)
        while (!m.content.empty() && (m.content.back() == '\n' || m.content.back() == '\r')) m.content.pop_back();
    return turns;
}

std::vector<Message> read_prefix_file(const std::string& path) {
    std::string text;
    try {
        text = read_regular_file(path, kMaxPrefixBytes);
    } catch (const Error& e) {
        fail("--prefix-file {}", e.what());
    }
    return parse_prefix(text, path);
}

}  // namespace ds4::chat
