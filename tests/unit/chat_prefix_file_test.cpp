// --prefix-file's format (chat/prefix_file.h): alternating USER:/ASSISTANT: turns opened at the
// start of a line, multi-line texts, the last turn the assistant's, and a clear error for each
// malformed file.
#include <gtest/gtest.h>

#include <string>

#include "chat/prefix_file.h"
#include "common/error.h"

namespace {

using ds4::chat::Role;
using ds4::chat::parse_prefix;

std::string error_of(const std::string& text) {
    try {
        parse_prefix(text, "p.txt");
    } catch (const ds4::Error& e) {
        return e.what();
    }
    return "";
}

TEST(PrefixFile, TurnsAlternateAndKeepTheirLines) {
    const auto t = parse_prefix("\n\nUSER: What is 2+2?\nASSISTANT: 4\nUSER:Two lines:\n  indented\nUSER is a word here\n"
                                "ASSISTANT: ok\n\n",
                                "p.txt");
    ASSERT_EQ(t.size(), 4u);
    EXPECT_EQ(t[0].role, Role::User);
    EXPECT_EQ(t[0].content, "What is 2+2?");
    EXPECT_EQ(t[1].role, Role::Assistant);
    EXPECT_EQ(t[1].content, "4");
    EXPECT_EQ(t[2].content, "Two lines:\n  indented\nUSER is a word here");  // "USER " is no marker
    EXPECT_EQ(t[3].content, "ok");
    // A marker not at the start of a line is text.
    const auto u = parse_prefix("USER: say  ASSISTANT: hi\nASSISTANT: hi", "p.txt");
    ASSERT_EQ(u.size(), 2u);
    EXPECT_EQ(u[0].content, "say  ASSISTANT: hi");
}

TEST(PrefixFile, MalformedFilesSayWhatAndWhere) {
    EXPECT_EQ(error_of("hello\nUSER: x\nASSISTANT: y"), "p.txt:1: text before the first turn (turns start with "
                                                        "\"USER:\" or \"ASSISTANT:\" at the start of a line)");
    EXPECT_EQ(error_of("ASSISTANT: y"), "p.txt:1: expected a USER turn: USER and ASSISTANT turns alternate, starting with USER");
    EXPECT_EQ(error_of("USER: a\nUSER: b\nASSISTANT: c"),
              "p.txt:2: expected an ASSISTANT turn: USER and ASSISTANT turns alternate, starting with USER");
    EXPECT_NE(error_of("USER: a\nASSISTANT: b\nUSER: c").find("the last turn must be the assistant's"), std::string::npos);
    EXPECT_NE(error_of("\n \n").find("no turn"), std::string::npos);
    EXPECT_NE(error_of("").find("no turn"), std::string::npos);
}

TEST(PrefixFile, AMissingOrSpecialFileIsRefused) {
    try {
        ds4::chat::read_prefix_file("/nonexistent/prefix.txt");
        ADD_FAILURE();
    } catch (const ds4::Error& e) {
        EXPECT_NE(std::string(e.what()).find("--prefix-file /nonexistent/prefix.txt"), std::string::npos) << e.what();
    }
    EXPECT_THROW(ds4::chat::read_prefix_file("/dev/zero"), ds4::Error);
}

}  // namespace
