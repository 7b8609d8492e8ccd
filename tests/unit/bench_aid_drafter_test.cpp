// The measuring aid of ds4-bench --spec-aid (tools/ds4-bench/aid_drafter.h): it proposes the
// known continuation after the pending token, makes each draft wrong with probability 1 -
// accept by the position alone (so every proposal of a position agrees and runs repeat), and
// a wrong draft is never the true token.
#include <gtest/gtest.h>

#include <vector>

#include "aid_drafter.h"
#include "common/error.h"

namespace ds4::bench {
namespace {

constexpr int64_t kVocab = 1000;

std::vector<int32_t> continuation(int n) {
    std::vector<int32_t> c(static_cast<size_t>(n), 0);
    for (int i = 0; i < n; ++i) c[size_t(i)] = int32_t((i * 37 + 5) % kVocab);
    return c;
}

// A history of `len` tokens (their values do not matter to the aid, only the position).
std::vector<int32_t> history(int64_t len) { return std::vector<int32_t>(size_t(len), 7); }

TEST(AidDrafter, AlwaysRightProposesTheContinuationUpToMaxAndItsEnd) {
    const auto c = continuation(10);
    AidDrafter d(c, 100, 1.0, kVocab);
    // The pending token c[2] sits at position 102: the drafts are c[3..].
    EXPECT_EQ(d.propose(history(102), c[2], 3).tokens, (std::vector<int32_t>{c[3], c[4], c[5]}));
    EXPECT_EQ(d.propose(history(107), c[7], 5).tokens, (std::vector<int32_t>{c[8], c[9]}));
    EXPECT_TRUE(d.propose(history(109), c[9], 4).tokens.empty());  // nothing known after the end
    // Off the continuation (another pending token, or a position outside it): no drafts.
    EXPECT_TRUE(d.propose(history(102), c[3], 3).tokens.empty());
    EXPECT_TRUE(d.propose(history(99), c[0], 3).tokens.empty());
    EXPECT_TRUE(d.propose(history(110), c[0], 3).tokens.empty());
}

TEST(AidDrafter, NeverRightAtZero) {
    const auto c = continuation(200);
    AidDrafter d(c, 0, 0.0, kVocab);
    for (int64_t p = 1; p < 200; ++p) {
        const int32_t t = d.draft_at(p);
        EXPECT_NE(t, c[size_t(p)]) << p;
        EXPECT_GE(t, 0);
        EXPECT_LT(t, kVocab);
    }
    // Even with a vocabulary of two the wrong token exists.
    AidDrafter two({0, 1, 0, 1}, 0, 0.0, 2);
    for (int64_t p = 0; p < 4; ++p) EXPECT_EQ(two.draft_at(p), 1 - p % 2);
}

// At 0.5 about half the positions are right; the decision depends on the position only (two
// aids agree, and a proposal starting anywhere repeats the same drafts), and a higher accept
// keeps every position a lower one kept.
TEST(AidDrafter, HalfIsDecidedPerPosition) {
    const int n = 4000;
    const auto c = continuation(n);
    AidDrafter a(c, 0, 0.5, kVocab), b(c, 0, 0.5, kVocab), hi(c, 0, 0.8, kVocab);
    int right = 0, right_hi = 0;
    for (int64_t p = 0; p < n; ++p) {
        const bool ok = a.draft_at(p) == c[size_t(p)];
        right += ok;
        right_hi += hi.draft_at(p) == c[size_t(p)];
        EXPECT_EQ(a.draft_at(p), b.draft_at(p));
        if (ok) {
            EXPECT_EQ(hi.draft_at(p), c[size_t(p)]) << p;
        }
    }
    EXPECT_NEAR(double(right) / n, 0.5, 0.04);
    EXPECT_NEAR(double(right_hi) / n, 0.8, 0.04);
    const auto from5 = a.propose(history(5), c[5], 6).tokens, from8 = a.propose(history(8), c[8], 3).tokens;
    ASSERT_EQ(from5.size(), 6u);
    for (int i = 0; i < 6; ++i) EXPECT_EQ(from5[size_t(i)], a.draft_at(6 + i));
    EXPECT_EQ(std::vector<int32_t>(from5.begin() + 3, from5.end()), from8);
}

TEST(AidDrafter, RefusesAnAcceptOutsideZeroToOne) {
    EXPECT_THROW(AidDrafter(continuation(4), 0, 1.5, kVocab), Error);
    EXPECT_THROW(AidDrafter(continuation(4), 0, -0.1, kVocab), Error);
    EXPECT_THROW(AidDrafter(continuation(4), 0, 0.5, 1), Error);
}

}  // namespace
}  // namespace ds4::bench
