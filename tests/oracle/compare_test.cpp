// The logits comparison library on hand-made rows whose answers are worked out in the comments
// (no oracle needed).
#include "support/compare.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "common/error.h"

namespace ds4::oracle {

using namespace ds4::test;  // the helpers of tests/support
namespace {

Logits make(int64_t n_vocab, std::vector<float> v) {
    Logits l;
    l.n_vocab = n_vocab;
    l.n_tokens = static_cast<int64_t>(v.size()) / n_vocab;
    l.values = std::move(v);
    return l;
}

TEST(ComparePosition, IdenticalRowsHaveZeroDistance) {
    const float r[] = {1, 2, 3, 4};
    const PositionStats s = compare_position(r, r, 4);
    EXPECT_EQ(s.max_abs_diff, 0.0);
    EXPECT_EQ(s.rel_err, 0.0);
    EXPECT_EQ(s.kl, 0.0);
    EXPECT_TRUE(s.top1_agree);
    EXPECT_EQ(s.ref_top1, 3);
}

TEST(ComparePosition, OneChangedLogit) {
    // ref [1,2,3,4]: mean 2.5, variance (2.25+0.25+0.25+2.25)/4 = 1.25, std sqrt(1.25).
    // test raises logit 2 by 0.5: max|d| 0.5, rel 0.5/sqrt(1.25) = 0.44721...
    // KL = sum p(r-t) - lse(r) + lse(t) = -0.5 p2 + lse(t) - lse(r)
    //    = -0.5*e^3/(e+e^2+e^3+e^4) + ln(e+e^2+e^3.5+e^4) - ln(e+e^2+e^3+e^4) = 0.0245075561...
    const float r[] = {1, 2, 3, 4};
    const float t[] = {1, 2, 3.5f, 4};
    const PositionStats s = compare_position(r, t, 4);
    EXPECT_DOUBLE_EQ(s.max_abs_diff, 0.5);
    EXPECT_NEAR(s.ref_std, 1.118033988749895, 1e-14);
    EXPECT_NEAR(s.rel_err, 0.4472135954999579, 1e-14);
    EXPECT_NEAR(s.kl, 0.024507556119971116, 1e-13);
    EXPECT_TRUE(s.top1_agree);
    EXPECT_EQ(s.test_top1, 3);
}

TEST(ComparePosition, TopOneFlip) {
    // ref [0,1,0]: mean 1/3, variance (1/9+4/9+1/9)/3 = 2/9; test [2,1,0]: max|d| 2,
    // rel 2/sqrt(2/9) = 4.2426...; KL = -2 p0 + ln(e^2+e+1) - ln(2+e) with p0 = 1/(2+e)
    // = 0.43227813...
    const float r[] = {0, 1, 0};
    const float t[] = {2, 1, 0};
    const PositionStats s = compare_position(r, t, 3);
    EXPECT_DOUBLE_EQ(s.max_abs_diff, 2.0);
    EXPECT_NEAR(s.ref_std, 0.4714045207910317, 1e-14);
    EXPECT_NEAR(s.rel_err, 4.242640687119285, 1e-13);
    EXPECT_NEAR(s.kl, 0.4322781352781586, 1e-13);
    EXPECT_FALSE(s.top1_agree);
    EXPECT_EQ(s.ref_top1, 1);
    EXPECT_EQ(s.test_top1, 0);
}

TEST(ComparePosition, KlIgnoresAConstantShift) {
    // softmax(x + 10) == softmax(x): KL 0 although every logit moved by 10.
    const float r[] = {0.5f, -1, 2, 0};
    const float t[] = {10.5f, 9, 12, 10};
    const PositionStats s = compare_position(r, t, 4);
    EXPECT_DOUBLE_EQ(s.max_abs_diff, 10.0);
    EXPECT_NEAR(s.kl, 0.0, 1e-12);
    EXPECT_TRUE(s.top1_agree);
}

TEST(ComparePosition, TiesPickTheLowestId) {
    const float r[] = {1, 5, 5, 2};
    const float t[] = {1, 5, 6, 2};
    const PositionStats s = compare_position(r, t, 4);
    EXPECT_EQ(s.ref_top1, 1);
    EXPECT_EQ(s.test_top1, 2);
    EXPECT_FALSE(s.top1_agree);
}

TEST(ComparePosition, ConstantReferenceRow) {
    const float r[] = {3, 3, 3};
    const float same[] = {3, 3, 3};
    const float moved[] = {3, 3.25f, 3};
    EXPECT_EQ(compare_position(r, same, 3).rel_err, 0.0);
    const PositionStats s = compare_position(r, moved, 3);
    EXPECT_EQ(s.ref_std, 0.0);
    EXPECT_TRUE(std::isinf(s.rel_err));
}

TEST(ComparePosition, NonFiniteNeverPasses) {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    const float r[] = {1, 2, 3};
    const float t[] = {1, nan, 3};
    const PositionStats s = compare_position(r, t, 3);
    EXPECT_TRUE(std::isinf(s.max_abs_diff));
    EXPECT_TRUE(std::isinf(s.rel_err));
    EXPECT_TRUE(std::isinf(s.kl));
    EXPECT_FALSE(s.top1_agree);
    const float inf = std::numeric_limits<float>::infinity();
    const float u[] = {1, 2, inf};
    EXPECT_TRUE(std::isinf(compare_position(r, u, 3).rel_err));
}

TEST(CompareLogits, SummaryOverPositions) {
    // 4 positions of the 2-wide ref row [0, 2] (mean 1, std 1), so rel == max|d|:
    //   p0: identical                    rel 0
    //   p1: [0, 2.001]                   rel 0.001  (within tol 0.01)
    //   p2: [0.5, 2]                     rel 0.5    (first divergence at tol 0.01)
    //   p3: [3, 2]                       rel 3      (top-1 flips)
    // median rel = (0.001 + 0.5) / 2; worst rel 3 at position 3; agreement 3/4.
    const Logits ref = make(2, {0, 2, 0, 2, 0, 2, 0, 2});
    const Logits test = make(2, {0, 2, 0, 2.001f, 0.5f, 2, 3, 2});
    const CompareSummary s = compare_logits(ref, test, 0.01);
    ASSERT_EQ(s.n_positions, 4);
    ASSERT_EQ(s.positions.size(), 4u);
    EXPECT_EQ(s.first_divergence, 2);
    EXPECT_DOUBLE_EQ(s.worst_rel_err, 3.0);
    EXPECT_EQ(s.worst_rel_err_pos, 3);
    EXPECT_DOUBLE_EQ(s.worst_max_abs_diff, 3.0);
    EXPECT_NEAR(s.median_rel_err, (0.001 + 0.5) / 2, 1e-6);  // 2.001f is not exactly 2.001
    EXPECT_NEAR(s.median_max_abs_diff, (0.001 + 0.5) / 2, 1e-6);
    EXPECT_DOUBLE_EQ(s.top1_agreement, 0.75);
    EXPECT_GT(s.worst_kl, s.median_kl);
    // A looser tolerance moves the first divergence to position 3; a tighter one to 1.
    EXPECT_EQ(compare_logits(ref, test, 1.0).first_divergence, 3);
    EXPECT_EQ(compare_logits(ref, test, 1e-4).first_divergence, 1);
    EXPECT_EQ(compare_logits(ref, test, 10.0).first_divergence, -1);
    EXPECT_NE(describe(s).find("first divergence"), std::string::npos);
}

TEST(CompareLogits, OddCountMedianIsTheMiddleValue) {
    const Logits ref = make(2, {0, 2, 0, 2, 0, 2});
    const Logits test = make(2, {0, 2.5f, 0, 4, 0, 2.25f});  // rel 0.5, 2, 0.25
    EXPECT_DOUBLE_EQ(compare_logits(ref, test, 1e-3).median_rel_err, 0.5);
}

TEST(CompareLogits, ShapeMismatchIsAnError) {
    EXPECT_THROW(compare_logits(make(2, {0, 1}), make(2, {0, 1, 2, 3}), 1e-3), Error);
    EXPECT_THROW(compare_logits(make(2, {0, 1, 2, 3}), make(4, {0, 1, 2, 3}), 1e-3), Error);
}

class LoadLogits : public ::testing::Test {
protected:
    std::filesystem::path path_ = std::filesystem::temp_directory_path() /
                                  ("ds4_compare_test_" + std::to_string(::getpid()) + ".f32");
    void write(const std::vector<float>& v) {
        FILE* f = std::fopen(path_.c_str(), "wb");
        ASSERT_NE(f, nullptr);
        ASSERT_EQ(std::fwrite(v.data(), sizeof(float), v.size(), f), v.size());
        std::fclose(f);
    }
    void TearDown() override { std::filesystem::remove(path_); }
};

TEST_F(LoadLogits, ReadsRowsOfNVocab) {
    write({1, 2, 3, 4, 5, 6});
    const Logits l = load_logits(path_.string(), 3);
    EXPECT_EQ(l.n_tokens, 2);
    EXPECT_EQ(l.row(1)[0], 4.0f);
    EXPECT_EQ(l.row(1)[2], 6.0f);
}

TEST_F(LoadLogits, RejectsSizesThatAreNotWholeRows) {
    write({1, 2, 3, 4, 5, 6});
    EXPECT_THROW(load_logits(path_.string(), 4), Error);
    EXPECT_THROW(load_logits(path_.string(), 0), Error);
    write({});
    EXPECT_THROW(load_logits(path_.string(), 1), Error);
    EXPECT_THROW(load_logits((path_.string() + ".missing"), 1), Error);
}

}  // namespace
}  // namespace ds4::oracle
