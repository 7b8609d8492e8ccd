// The agent's saved sessions (docs/AGENT.md, "Sessions"): one file per session in the session
// directory (~/.ds4/sessions, or --session-dir), named <id>.session, in the disk KV cache's
// checksummed file format (kvcache/file_format.h) written atomically: the text part is the
// conversation as JSON (messages, the exact token ids, the title), the payload is the
// engine's state (docs/STATE_FORMAT.md), so a resumed session goes on with no prefill. A
// stripped session keeps the text and drops the payload: it resumes by prefilling its tokens.
//
// The id is stable: the first 12 hex digits of a hash of the first user message and the
// creation time. Commands take any unique prefix of it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "chat/message.h"
#include "kvcache/file_format.h"

namespace ds4::agent {

struct SessionData {
    std::string id;
    uint64_t created = 0;  // unix seconds
    std::string title;     // the first user message, cut
    std::vector<chat::Message> messages;
    std::vector<int32_t> tokens;
    std::vector<uint8_t> state;  // empty: stripped
};

struct SessionInfo {
    std::string id;
    uint64_t created = 0;
    std::string title;
    uint64_t tokens = 0;
    uint64_t bytes = 0;
    bool stripped = false;
    std::string problem;  // "" or why the file cannot be used (another model, damaged)
};

// "<12 hex digits>" for a session begun with `first_user` at `created`.
std::string session_id(const std::string& first_user, uint64_t created);

class SessionStore {
public:
    // Creates `dir` (and its parents) when missing. Throws ds4::Error when it cannot.
    SessionStore(std::string dir, kvcache::ModelId model, uint32_t payload_version);
    const std::string& dir() const { return dir_; }

    // Writes (replaces) the session's file atomically. Throws ds4::Error.
    void save(const SessionData& s, int64_t ctx) const;
    // Every session file, newest first; unreadable ones carry their problem.
    std::vector<SessionInfo> list() const;
    // The full id of the one session whose id starts with `prefix`. Throws ds4::Error when none
    // or several match.
    std::string find(const std::string& prefix) const;
    // Reads and checks a whole session. Throws ds4::Error.
    SessionData load(const std::string& id) const;
    void remove(const std::string& id) const;
    // Rewrites the session without its state; returns the bytes freed.
    uint64_t strip(const std::string& id) const;

private:
    std::string path(const std::string& id) const;
    std::string dir_;
    kvcache::ModelId model_;
    uint32_t payload_version_;
};

}  // namespace ds4::agent
