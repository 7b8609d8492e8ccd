#include "agent/sessions.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace ds4::agent {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kExt = ".session";

const char* role_name(chat::Role r) {
    switch (r) {
        case chat::Role::System: return "system";
        case chat::Role::Developer: return "developer";
        case chat::Role::User: return "user";
        case chat::Role::Assistant: return "assistant";
        case chat::Role::Tool: return "tool";
    }
    return "user";
}

std::string to_text(const SessionData& s) {
    json msgs = json::array();
    for (const auto& m : s.messages) {
        json j = {{"role", role_name(m.role)}, {"content", m.content}};
        if (!m.reasoning.empty()) j["reasoning"] = m.reasoning;
        if (!m.tool_call_id.empty()) j["tool_call_id"] = m.tool_call_id;
        if (!m.name.empty()) j["name"] = m.name;
        if (!m.tool_calls.empty()) {
            j["tool_calls"] = json::array();
            for (const auto& c : m.tool_calls)
                j["tool_calls"].push_back({{"id", c.id}, {"name", c.name}, {"arguments", c.arguments}});
        }
        msgs.push_back(std::move(j));
    }
    return json{{"format", "ds4-agent-session"}, {"version", 1},        {"id", s.id},
                {"created", s.created},            {"title", s.title}, {"messages", msgs},
                {"tokens", s.tokens}}
        .dump();
}

SessionData from_text(const std::string& text, const std::string& name) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || j.value("format", "") != "ds4-agent-session")
        fail("{}: not a ds4-agent session", name);
    SessionData s;
    try {
        s.id = j.at("id").get<std::string>();
        s.created = j.at("created").get<uint64_t>();
        s.title = j.value("title", "");
        s.tokens = j.at("tokens").get<std::vector<int32_t>>();
        for (const auto& m : j.at("messages")) {
            chat::Message msg{.role = chat::role_from_string(m.at("role").get<std::string>()),
                              .content = m.value("content", "")};
            msg.reasoning = m.value("reasoning", "");
            msg.tool_call_id = m.value("tool_call_id", "");
            msg.name = m.value("name", "");
            if (m.contains("tool_calls"))
                for (const auto& c : m["tool_calls"])
                    msg.tool_calls.push_back({c.at("id").get<std::string>(), c.at("name").get<std::string>(),
                                              c.at("arguments").get<std::string>()});
            s.messages.push_back(std::move(msg));
        }
    } catch (const json::exception& e) {
        fail("{}: damaged session text: {}", name, e.what());
    }
    return s;
}

}  // namespace

std::string session_id(const std::string& first_user, uint64_t created) {
    // FNV-1a 64 over the message and the time: stable across runs and builds.
    uint64_t h = 1469598103934665603ull;
    auto mix = [&](std::string_view s) {
        for (unsigned char c : s) {
            h ^= c;
            h *= 1099511628211ull;
        }
    };
    mix(first_user);
    mix("\n");
    mix(std::to_string(created));
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return std::string(buf, 12);
}

SessionStore::SessionStore(std::string dir, kvcache::ModelId model, uint32_t payload_version)
    : dir_(std::move(dir)), model_(model), payload_version_(payload_version) {
    std::error_code ec;
    fs::create_directories(dir_, ec);
    if (ec || !fs::is_directory(dir_)) fail("session directory {}: {}", dir_, ec ? ec.message() : "not a directory");
}

std::string SessionStore::path(const std::string& id) const { return dir_ + "/" + id + kExt; }

void SessionStore::save(const SessionData& s, int64_t ctx) const {
    kvcache::write_file(path(s.id), to_text(s), s.state,
                        {kvcache::SaveReason::manual, int64_t(s.tokens.size()), ctx}, {}, model_, payload_version_);
}

std::vector<SessionInfo> SessionStore::list() const {
    std::vector<SessionInfo> out;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir_, ec)) {
        const std::string name = e.path().filename().string();
        if (name.size() <= std::strlen(kExt) || !name.ends_with(kExt) || !e.is_regular_file(ec)) continue;
        SessionInfo info;
        info.id = name.substr(0, name.size() - std::strlen(kExt));
        info.bytes = e.file_size(ec);
        const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
        try {
            if (fd < 0) fail("cannot open");
            kvcache::FdSource src(fd, info.bytes, name);
            const kvcache::Header h = kvcache::read_header(src, {model_, payload_version_}, name);
            std::string text(size_t(h.text_bytes), '\0');
            src.read(text.data(), text.size(), kvcache::kHeaderBytes);
            const SessionData s = from_text(text, name);
            info.created = s.created;
            info.title = s.title;
            info.tokens = h.tokens;
            info.stripped = h.payload_bytes == 0;
        } catch (const Error& err) {
            info.problem = err.what();
        }
        if (fd >= 0) ::close(fd);
        out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) {
        return a.created != b.created ? a.created > b.created : a.id < b.id;
    });
    return out;
}

std::string SessionStore::find(const std::string& prefix) const {
    if (prefix.empty()) fail("no session id given");
    std::vector<std::string> hits;
    for (const auto& s : list())
        if (s.id.rfind(prefix, 0) == 0) hits.push_back(s.id);
    if (hits.empty()) fail("no session {} in {}", prefix, dir_);
    if (hits.size() > 1) fail("{} sessions start with {}: give more of the id", hits.size(), prefix);
    return hits[0];
}

SessionData SessionStore::load(const std::string& id) const {
    const kvcache::Entry e = kvcache::read_file(path(id), model_, payload_version_);
    SessionData s = from_text(e.text, path(id));
    s.state = e.payload;
    return s;
}

void SessionStore::remove(const std::string& id) const {
    if (::unlink(path(id).c_str()) != 0) fail("{}: cannot delete", path(id));
}

uint64_t SessionStore::strip(const std::string& id) const {
    const kvcache::Entry e = kvcache::read_file(path(id), model_, payload_version_);
    if (e.payload.empty()) return 0;
    kvcache::write_file(path(id), e.text, {}, {kvcache::SaveReason::manual, int64_t(e.header.tokens),
                                              int64_t(e.header.ctx)},
                        {}, model_, payload_version_);
    return e.payload.size();
}

}  // namespace ds4::agent
