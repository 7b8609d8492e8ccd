// The reply store (server/response_store.h) and how a request that continues a reply by
// reference is expanded (server/continuation.h): previous_response_id, tool results sent
// without their calls, and the 400s for ids the server does not hold.
#include <gtest/gtest.h>

#include "server/continuation.h"
#include "server/response_store.h"

namespace ds4::server {
namespace {

std::shared_ptr<StoredTurn> turn(const std::string& system, const std::string& user, const std::string& call_id) {
    auto t = std::make_shared<StoredTurn>();
    t->messages.push_back({.role = chat::Role::System, .content = system});
    t->messages.push_back({.role = chat::Role::User, .content = user});
    chat::Message a{.role = chat::Role::Assistant, .content = "answer"};
    if (!call_id.empty()) a.tool_calls.push_back({call_id, "get_weather", "{\"city\":\"Paris\"}"});
    t->messages.push_back(a);
    t->tokens = {1, 2, 3};
    t->text = "abc";
    return t;
}

TEST(ResponseStore, LeastRecentlyUsedGoFirstByCountAndBytes) {
    ResponseStore s(2, 1 << 20);
    auto a = turn("s", "a", ""), b = turn("s", "b", ""), c = turn("s", "c", "");
    s.put("resp:a", a);
    s.put("resp:b", b);
    EXPECT_EQ(s.get("resp:a"), a);  // a is now the most recently used
    s.put("resp:c", c);
    EXPECT_EQ(s.get("resp:b"), nullptr);
    EXPECT_EQ(s.get("resp:a"), a);
    EXPECT_EQ(s.get("resp:c"), c);

    // A turn under several keys counts its bytes once; it goes when its last key goes.
    ResponseStore t(10, 1 << 20);
    t.put("resp:x", a);
    t.put("call:x1", a);
    t.put("call:x2", a);
    EXPECT_EQ(t.size(), 3u);
    EXPECT_EQ(t.bytes(), a->bytes());

    // The byte bound: a turn over it alone is not kept; older turns make room for new ones.
    ResponseStore u(10, a->bytes() + b->bytes() / 2);
    u.put("resp:a", a);
    u.put("resp:b", b);
    EXPECT_EQ(u.get("resp:a"), nullptr);
    EXPECT_EQ(u.get("resp:b"), b);
    ResponseStore tiny(10, 8);
    tiny.put("resp:a", a);
    EXPECT_EQ(tiny.size(), 0u);
    ResponseStore off(0, 1 << 20);
    off.put("resp:a", a);
    EXPECT_EQ(off.get("resp:a"), nullptr);
}

TEST(Continuation, PreviousResponseIdPrependsTheStoredConversationWithoutItsInstructions) {
    ResponseStore s;
    s.put("resp:r1", turn("old instructions", "hi", ""));
    Request r;
    r.api = Api::Responses;
    r.previous_response_id = "r1";
    r.messages = {{.role = chat::Role::System, .content = "new instructions"},
                  {.role = chat::Role::User, .content = "and then?"}};
    const auto base = expand_continuation(r, &s);
    ASSERT_NE(base, nullptr);
    ASSERT_EQ(r.messages.size(), 4u);
    EXPECT_EQ(r.messages[0].content, "new instructions");
    EXPECT_EQ(r.messages[1].content, "hi");
    EXPECT_EQ(r.messages[2].role, chat::Role::Assistant);
    EXPECT_EQ(r.messages[3].content, "and then?");

    Request unknown;
    unknown.api = Api::Responses;
    unknown.previous_response_id = "nope";
    unknown.messages = {{.role = chat::Role::User, .content = "x"}};
    try {
        expand_continuation(unknown, &s);
        FAIL() << "no error";
    } catch (const RequestError& e) {
        EXPECT_EQ(e.status, 400);
        EXPECT_EQ(e.param, "previous_response_id");
        EXPECT_EQ(e.code, "previous_response_not_found");
        EXPECT_NE(std::string(e.what()).find("'nope' not found"), std::string::npos);
    }
}

TEST(Continuation, ToolResultsWithoutTheirCallContinueTheReplyThatMadeIt) {
    ResponseStore s;
    auto t = turn("sys", "weather?", "call_1");
    s.put("call:call_1", t);
    Request r;
    r.api = Api::Messages;
    r.messages = {{.role = chat::Role::Tool, .content = "sunny", .tool_call_id = "call_1"}};
    EXPECT_EQ(expand_continuation(r, &s), t);
    ASSERT_EQ(r.messages.size(), 4u);  // the turn's system kept: the request has none
    EXPECT_EQ(r.messages[0].content, "sys");
    EXPECT_EQ(r.messages[2].tool_calls.at(0).id, "call_1");
    EXPECT_EQ(r.messages[3].content, "sunny");

    // A result whose call is in the request is an ordinary replay: nothing looked up.
    Request full;
    full.api = Api::Responses;
    full.messages = r.messages;
    EXPECT_EQ(expand_continuation(full, nullptr), nullptr);
    EXPECT_EQ(full.messages.size(), 4u);

    // Ids the server never issued (or forgot): 400 naming the id, in each API's terms.
    for (Api api : {Api::Responses, Api::Messages}) {
        Request u;
        u.api = api;
        u.messages = {{.role = chat::Role::Tool, .content = "x", .tool_call_id = "call_zzz"}};
        try {
            expand_continuation(u, &s);
            FAIL() << "no error";
        } catch (const RequestError& e) {
            EXPECT_EQ(e.status, 400);
            EXPECT_EQ(e.param, api == Api::Messages ? "messages" : "input");
            EXPECT_NE(std::string(e.what()).find("'call_zzz'"), std::string::npos) << e.what();
            EXPECT_NE(std::string(e.what()).find("continuation state is not available"), std::string::npos);
        }
    }
    // Chat requests carry their history: never expanded.
    Request c;
    c.api = Api::Chat;
    c.messages = {{.role = chat::Role::Tool, .content = "x", .tool_call_id = "call_zzz"}};
    EXPECT_EQ(expand_continuation(c, &s), nullptr);
}

}  // namespace
}  // namespace ds4::server
