// The agent's session store (src/agent/sessions.h): saved atomically in the checksummed
// KV-cache file format, listed newest first, found by id prefix, stripped of the KV state
// with the text kept, deleted; a damaged file is refused, not half-loaded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "agent/sessions.h"
#include "common/error.h"
#include "support/tool_run.h"

namespace ds4::agent {
namespace {

namespace fs = std::filesystem;

SessionData session(const std::string& first, uint64_t created) {
    SessionData s;
    s.id = session_id(first, created);
    s.created = created;
    s.title = first;
    s.messages = {{.role = chat::Role::System, .content = "sys"},
                  {.role = chat::Role::User, .content = first},
                  {.role = chat::Role::Assistant, .content = "ok", .reasoning = "hmm",
                   .tool_calls = {{"call_1", "read", R"({"path":"a"})"}}},
                  {.role = chat::Role::Tool, .content = "a: lines 1-1", .tool_call_id = "call_1", .name = "read"}};
    s.tokens = {0, 5, 7, 9};
    s.state = std::vector<uint8_t>(1000, 0xab);
    return s;
}

TEST(AgentSessions, SaveListSwitchStripDelete) {
    test::TempDir dir;
    const kvcache::ModelId id{1, 2, 3};
    const SessionStore store(dir.file("sessions/nested"), id, 7);
    EXPECT_TRUE(store.list().empty());
    const SessionData a = session("fix the build", 1000), b = session("write docs", 2000);
    EXPECT_EQ(a.id.size(), 12u);
    EXPECT_EQ(a.id, session_id("fix the build", 1000)) << "ids are stable";
    EXPECT_NE(a.id, session_id("fix the build", 1001));
    store.save(a, 4096);
    store.save(b, 4096);
    auto list = store.list();
    ASSERT_EQ(list.size(), 2u);
    EXPECT_EQ(list[0].id, b.id);  // newest first
    EXPECT_EQ(list[1].title, "fix the build");
    EXPECT_EQ(list[1].tokens, 4u);
    EXPECT_FALSE(list[1].stripped);
    EXPECT_EQ(store.find(a.id.substr(0, 6)), a.id);
    EXPECT_THROW(store.find("zzzz"), Error);

    const SessionData back = store.load(a.id);
    EXPECT_EQ(back.tokens, a.tokens);
    EXPECT_EQ(back.state, a.state);
    ASSERT_EQ(back.messages.size(), 4u);
    EXPECT_EQ(back.messages[2].reasoning, "hmm");
    ASSERT_EQ(back.messages[2].tool_calls.size(), 1u);
    EXPECT_EQ(back.messages[2].tool_calls[0].arguments, R"({"path":"a"})");
    EXPECT_EQ(back.messages[3].tool_call_id, "call_1");

    EXPECT_EQ(store.strip(a.id), 1000u);
    list = store.list();
    EXPECT_TRUE(list[1].stripped);
    const SessionData stripped = store.load(a.id);
    EXPECT_TRUE(stripped.state.empty());
    EXPECT_EQ(stripped.tokens, a.tokens) << "the text stays";
    EXPECT_EQ(stripped.messages.size(), 4u);

    // Another model's store cannot use them.
    const SessionStore other(dir.file("sessions/nested"), kvcache::ModelId{9}, 7);
    EXPECT_THROW(other.load(a.id), Error);
    EXPECT_FALSE(other.list()[0].problem.empty());

    store.remove(b.id);
    EXPECT_EQ(store.list().size(), 1u);
    EXPECT_THROW(store.remove(b.id), Error);
    // No temporaries left behind by the atomic writes.
    size_t files = 0;
    for (const auto& e : fs::directory_iterator(dir.file("sessions/nested"))) files += e.is_regular_file();
    EXPECT_EQ(files, 1u);
}

TEST(AgentSessions, DamagedFileIsRefused) {
    test::TempDir dir;
    const SessionStore store(dir.path().string(), kvcache::ModelId{}, 1);
    const SessionData a = session("x", 5);
    store.save(a, 100);
    const fs::path p = dir.path() / (a.id + ".session");
    {
        std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(300);
        f.put('\x55');
    }
    EXPECT_THROW(store.load(a.id), Error);
}

}  // namespace
}  // namespace ds4::agent
