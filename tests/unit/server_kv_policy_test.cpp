// The disk KV cache's save policy (server/kv_policy.h): cold store points, continued frontiers,
// the rendered suffix a hit leaves to tokenize.
#include <gtest/gtest.h>

#include "server/kv_policy.h"
#include "tokenizer/tokenizer.h"

namespace ds4::server {
namespace {

constexpr int32_t kUser = 5, kAssistant = 6;

chat::MarkerIds specials() {
    chat::MarkerIds s;
    s.user = kUser;
    s.assistant = kAssistant;
    return s;
}

std::vector<int32_t> prompt(int64_t n, int64_t user_at, int64_t assistant_at) {
    std::vector<int32_t> p(static_cast<size_t>(n), 100);
    if (user_at >= 0) p[size_t(user_at)] = kUser;
    if (assistant_at >= 0) p[size_t(assistant_at)] = kAssistant;
    return p;
}

TEST(KvPolicy, ColdStorePointIsTheChatAnchorOrTheAlignedTrimmedEnd) {
    const KvPolicy p;  // min 512, cold max 30000, trim 32, align 2048
    // The last <｜User｜> before the first <｜Assistant｜>, when it holds min_tokens.
    EXPECT_EQ(cold_store_point(prompt(5000, 3000, 4000), p, specials()), 3000);
    // A user marker after the first assistant marker is not the anchor.
    EXPECT_EQ(cold_store_point(prompt(5000, 4500, 4000), p, specials()), 4096);
    // Too short an anchor: len - 32 aligned down to 2048.
    EXPECT_EQ(cold_store_point(prompt(5000, 100, 4000), p, specials()), 4096);
    EXPECT_EQ(cold_store_point(prompt(4127, 100, 4000), p, specials()), 2048);
    // Nothing below min_tokens, nothing above cold_max, nothing when the aligned point is short.
    EXPECT_EQ(cold_store_point(prompt(511, 10, 20), p, specials()), 0);
    EXPECT_EQ(cold_store_point(prompt(30001, 3000, 4000), p, specials()), 0);
    EXPECT_EQ(cold_store_point(prompt(2000, 10, 1999), p, specials()), 0);
    KvPolicy off = p;
    off.cold_max_tokens = 0;
    EXPECT_EQ(cold_store_point(prompt(5000, 3000, 4000), off, specials()), 0);
    KvPolicy small{.min_tokens = 8, .boundary_trim = 4, .boundary_align = 16};
    EXPECT_EQ(cold_store_point(prompt(70, 2, 60), small, specials()), 64);
}

TEST(KvPolicy, ContinuedFrontiersAreAbsoluteMultiplesOfTheAlignedInterval) {
    const KvPolicy p;  // 10000 rounded up to 2048: 10240
    EXPECT_EQ(continued_step(p), 10240);
    EXPECT_EQ(next_frontier(0, p), 10240);
    EXPECT_EQ(next_frontier(10239, p), 10240);
    EXPECT_EQ(next_frontier(10240, p), 20480);
    KvPolicy off = p;
    off.continued_interval = 0;
    EXPECT_EQ(next_frontier(5, off), 0);
}

TEST(KvPolicy, RenderedSuffixClipsTheUntrustedSpans) {
    chat::RenderedPrompt r{.text = "0123456789", .untrusted = {{1, 2}, {4, 4}, {9, 1}}};
    const auto s = rendered_suffix(r, 5);
    EXPECT_EQ(s.text, "56789");
    ASSERT_EQ(s.untrusted.size(), 2u);
    EXPECT_EQ(s.untrusted[0].offset, 0u);
    EXPECT_EQ(s.untrusted[0].length, 3u);  // 5..7 of the span 4..7
    EXPECT_EQ(s.untrusted[1].offset, 4u);
    EXPECT_EQ(s.untrusted[1].length, 1u);
    EXPECT_EQ(rendered_suffix(r, 99).text, "");
}

}  // namespace
}  // namespace ds4::server
