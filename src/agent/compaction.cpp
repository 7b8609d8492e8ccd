// Agent::compact (agent/agent.h): the summary prompt and the choice of the kept tail.
#include <algorithm>

#include "agent/agent.h"
#include "common/error.h"
#include "tokenizer/stream_decoder.h"
#include "tokenizer/tokenizer.h"

namespace ds4::agent {
namespace {

constexpr const char* kSummarySystem =
    "You summarise a coding session so that the work can go on from the summary alone.";
constexpr const char* kSummaryAsk =
    "\n\nWrite a summary of the session above for the agent that will continue it: the user's goals and "
    "requests, what has been done (files read and changed, commands run and what they gave), facts and "
    "decisions learnt, and what is left to do. Be concise; write only the summary.";
constexpr const char* kSummaryHeading = "\n\n## Summary of the earlier conversation\n\n";
constexpr size_t kResultBytes = 2000;  // of each tool result in the text summarised

std::string message_text(const chat::Message& m) {
    switch (m.role) {
        case chat::Role::System:
        case chat::Role::Developer: return "";
        case chat::Role::User: return "USER: " + m.content + "\n\n";
        case chat::Role::Assistant: {
            std::string s = "AGENT: " + m.content + "\n";
            for (const auto& c : m.tool_calls) s += "AGENT CALLS " + c.name + " " + c.arguments + "\n";
            return s + "\n";
        }
        case chat::Role::Tool: {
            const bool cut = m.content.size() > kResultBytes;
            return "RESULT OF " + m.name + ": " + m.content.substr(0, kResultBytes) + (cut ? " [...]" : "") + "\n\n";
        }
    }
    return "";
}

int64_t estimate(const tokenizer::Tokenizer& tok, const chat::Message& m) {
    int64_t n = int64_t(tok.encode(m.content).size() + tok.encode(m.reasoning).size()) + 8;
    for (const auto& c : m.tool_calls) n += int64_t(tok.encode(c.arguments).size()) + 16;
    return n;
}

}  // namespace

bool Agent::wants_compaction() const {
    const int64_t used = int64_t(conv_.tokens().size()), ctx = engine_.ctx();
    return used > 0 && (used * 100 >= ctx * 85 || ctx - used <= std::min<int64_t>(8192, ctx / 8));
}

std::optional<std::string> Agent::summarise(const std::string& text, const std::atomic<bool>* cancel) {
    const tokenizer::Tokenizer& tok = engine_.tokenizer();
    const int64_t max_summary = std::min<int64_t>(4096, engine_.ctx() / 8);
    // The text to summarise, its oldest part dropped when it would not fit beside the summary.
    std::vector<int32_t> ids = tok.encode(text);
    const int64_t room = engine_.ctx() - max_summary - 512;
    std::string body = text;
    if (int64_t(ids.size()) > room) {
        ids.erase(ids.begin(), ids.end() - std::max<int64_t>(0, room));
        body = "[the oldest part is left out]\n" + tok.decode(ids);
    }
    chat::RenderOptions ro;
    ro.thinking = chat::ThinkingMode::Off;
    const std::vector<int32_t> prompt = format_.tokenize(format_.render(
        {{.role = chat::Role::System, .content = kSummarySystem}, {.role = chat::Role::User, .content = body + kSummaryAsk}},
        ro));
    const engine::SyncResult s = engine_.sync(prompt, [&](int64_t d, int64_t t) { ui_.prefill(d, t, 0); }, cancel);
    if (s.cancelled) return std::nullopt;
    std::optional<std::vector<int32_t>> forced;
    if (script_next_ < options_.script.size())
        forced = tok.encode(options_.script[script_next_++], tokenizer::Special::Match);
    tokenizer::StreamDecoder decoder(tok);
    std::string out;
    const engine::GenerateResult g = engine_.generate(
        {.sampling = options_.sampling, .max_tokens = max_summary, .cancel = cancel, .forced = forced ? &*forced : nullptr},
        [&](int32_t id) {
            out += decoder.push(id);
            return true;
        });
    if (g.reason == engine::StopReason::Cancelled) return std::nullopt;
    out += decoder.flush();
    const std::string summary = format_.parse(out, {.thinking = false, .tools = false}).content;
    return summary.empty() ? std::string("(the model gave no summary)") : summary;
}

bool Agent::compact(const std::atomic<bool>* cancel, const std::string& why) {
    const std::vector<chat::Message>& msgs = conv_.messages();
    const size_t first = !msgs.empty() && msgs[0].role == chat::Role::System ? 1 : 0;
    // The kept tail: the longest run of whole turns from the end, starting at a user message,
    // within ctx/10 tokens (at most 50000).
    const int64_t budget = std::min<int64_t>(engine_.ctx() / 10, 50000);
    size_t keep = msgs.size();
    int64_t acc = 0;
    for (size_t i = msgs.size(); i-- > first;) {
        acc += estimate(engine_.tokenizer(), msgs[i]);
        if (acc > budget) break;
        if (msgs[i].role == chat::Role::User) keep = i;
    }
    if (keep <= first) {
        ui_.note("compaction: nothing older than the last " + std::to_string(budget) + " tokens to summarise");
        return false;
    }
    std::string text;
    if (conv_.system().size() > options_.system.size())
        text = "EARLIER SUMMARY: " + conv_.system().substr(options_.system.size() + std::string(kSummaryHeading).size()) +
               "\n\n";
    for (size_t i = first; i < keep; ++i) text += message_text(msgs[i]);
    const int64_t before = int64_t(conv_.tokens().size());
    ui_.note("compacting (" + why + "): summarising " + std::to_string(keep - first) + " messages, keeping " +
             std::to_string(msgs.size() - keep) + " verbatim");
    const std::optional<std::string> summary = summarise(text, cancel);
    if (!summary) {
        ui_.note("compaction stopped: the conversation is as it was");
        return false;
    }
    std::vector<chat::Message> tail(msgs.begin() + ptrdiff_t(keep), msgs.end());
    conv_.rebuild(options_.system + kSummaryHeading + *summary, std::move(tail));
    traced_ = 0;
    trace("compaction", "summary of " + std::to_string(before) + " tokens:\n" + *summary);
    ui_.note("compacted: " + std::to_string(before) + " tokens -> " + std::to_string(conv_.tokens().size()) +
             " (the summary and the kept messages; the next reply prefills them)");
    return true;
}

}  // namespace ds4::agent
