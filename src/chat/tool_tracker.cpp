#include "chat/tool_tracker.h"

#include <algorithm>

#include "chat/glm_markers.h"
#include "chat/markers.h"

namespace ds4::chat {
namespace {

// The last bytes of the reply, enough to recognise any marker the trackers look for.
class Tail {
public:
    void push(char c) {
        s_ += c;
        if (s_.size() > 2 * kKeep) s_.erase(0, s_.size() - kKeep);
    }
    bool ends_with(std::string_view m) const { return s_.size() >= m.size() && std::string_view(s_).substr(s_.size() - m.size()) == m; }
    // The longest suffix that is a proper prefix of `m`, in bytes.
    size_t partial(std::string_view m) const {
        for (size_t n = std::min(m.size() - 1, s_.size()); n > 0; --n)
            if (std::string_view(s_).substr(s_.size() - n) == m.substr(0, n)) return n;
        return 0;
    }
    void clear() { s_.clear(); }

private:
    static constexpr size_t kKeep = 64;
    std::string s_;
};

class DsmlTracker final : public ToolTracker {
public:
    explicit DsmlTracker(bool thinking) : state_(thinking ? State::Think : State::Outside) {
        const std::string d(kDsml);
        open_ = "<" + d + "tool_calls>";
        close_block_ = "</" + d + "tool_calls>";
        param_ = "<" + d + "parameter";
        close_param_ = "</" + d + "parameter>";
        close_start_ = "</" + d;
    }

    void feed(std::string_view text) override {
        for (char c : text) step(c);
    }

    bool structural() const override {
        switch (state_) {
            case State::Think:
            case State::Outside:
            case State::JsonString: return false;
            case State::Struct:
            case State::JsonStruct: return true;
            // Payload, unless the closing tag has begun (its marker is out).
            case State::StringBody: return tail_.partial(close_param_) >= close_start_.size();
        }
        return false;
    }

private:
    enum class State { Think, Outside, Struct, StringBody, JsonStruct, JsonString };

    void step(char c) {
        tail_.push(c);
        switch (state_) {
            case State::Think:
                if (tail_.ends_with(kThinkEnd)) state_ = State::Outside;
                break;
            case State::Outside:
                if (tail_.ends_with(open_)) enter(State::Struct);
                break;
            case State::Struct: tag(c); break;
            case State::StringBody:
                if (tail_.ends_with(close_param_)) enter(State::Struct);
                break;
            case State::JsonStruct:
                if (c == '"' && tag_.empty()) state_ = State::JsonString;
                else tag(c);
                break;
            case State::JsonString:
                if (escaped_) escaped_ = false;
                else if (c == '\\') escaped_ = true;
                else if (c == '"') state_ = State::JsonStruct;
                break;
        }
    }

    void enter(State s) {
        state_ = s;
        tag_.clear();
        quoted_ = false;
    }

    // A tag between '<' and '>' (quoted attribute values may hold '>'): a parameter opening
    // starts its body, the block's closing ends the block.
    void tag(char c) {
        if (tag_.empty()) {
            if (c == '<') tag_.push_back(c);
            return;
        }
        tag_ += c;
        if (c == '"') quoted_ = !quoted_;
        if (c != '>' || quoted_) return;
        const std::string t = std::move(tag_);
        tag_.clear();
        if (t.rfind(param_, 0) == 0)
            enter(t.find("string=\"false\"") != std::string::npos ? State::JsonStruct : State::StringBody);
        else if (t == close_param_) enter(State::Struct);
        else if (t == close_block_) enter(State::Outside);
    }

    State state_;
    Tail tail_;
    std::string tag_;  // the tag being read ("" outside one)
    bool quoted_ = false, escaped_ = false;
    std::string open_, close_block_, param_, close_param_, close_start_;
};

class GlmTracker final : public ToolTracker {
public:
    explicit GlmTracker(bool thinking) : state_(thinking ? State::Think : State::Outside) {}

    void feed(std::string_view text) override {
        for (char c : text) {
            tail_.push(c);
            switch (state_) {
                case State::Think:
                    if (tail_.ends_with(glm::kThinkEnd)) state_ = State::Outside;
                    break;
                case State::Outside:
                    if (tail_.ends_with(glm::kToolCall)) state_ = State::Struct;
                    break;
                case State::Struct:
                    if (tail_.ends_with(glm::kArgValue)) state_ = State::Value;
                    else if (tail_.ends_with(glm::kToolCallEnd)) state_ = State::Outside;
                    break;
                case State::Value:
                    if (tail_.ends_with(glm::kArgValueEnd)) state_ = State::Struct;
                    break;
            }
        }
    }
    bool structural() const override { return state_ == State::Struct; }

private:
    enum class State { Think, Outside, Struct, Value };
    State state_;
    Tail tail_;
};

}  // namespace

std::unique_ptr<ToolTracker> new_dsml_tracker(bool thinking) { return std::make_unique<DsmlTracker>(thinking); }
std::unique_ptr<ToolTracker> new_glm_tool_tracker(bool thinking) { return std::make_unique<GlmTracker>(thinking); }

}  // namespace ds4::chat
