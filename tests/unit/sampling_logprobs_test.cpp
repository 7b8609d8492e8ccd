// sampling::logprobs_at: log-softmax of one logits row at the sampled id and the most likely
// alternatives, against a direct computation.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"
#include "sampling/logprobs.h"

namespace ds4::sampling {
namespace {

TEST(Logprobs, LogSoftmaxAndTopAlternatives) {
    const std::vector<float> row = {1.0f, 3.0f, -2.0f, 3.0f, 0.5f};
    double z = 0;
    for (float x : row) z += std::exp(double(x));
    const LogprobsAt at = logprobs_at(row, 4, 3);
    EXPECT_NEAR(at.logprob, 0.5 - std::log(z), 1e-6);
    ASSERT_EQ(at.top.size(), 3u);
    // Ties go to the lower id: 1 before 3, then 0.
    EXPECT_EQ(at.top[0].id, 1);
    EXPECT_EQ(at.top[1].id, 3);
    EXPECT_EQ(at.top[2].id, 0);
    EXPECT_NEAR(at.top[0].logprob, 3.0 - std::log(z), 1e-6);
    EXPECT_NEAR(at.top[2].logprob, 1.0 - std::log(z), 1e-6);
    EXPECT_TRUE(logprobs_at(row, 0, 0).top.empty());
}

TEST(Logprobs, LargeLogitsDoNotOverflowAndBannedIdsAreFloored) {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> row = {1000.0f, 999.0f, -inf};
    const LogprobsAt at = logprobs_at(row, 2, 3);
    EXPECT_EQ(at.logprob, kMinLogprob);
    EXPECT_NEAR(at.top[0].logprob, -std::log1p(std::exp(-1.0)), 1e-5);
    EXPECT_NEAR(at.top[1].logprob, -1.0 - std::log1p(std::exp(-1.0)), 1e-5);
    EXPECT_EQ(at.top[2].logprob, kMinLogprob);
}

TEST(Logprobs, BadArgumentsThrow) {
    const std::vector<float> row = {0.0f, 1.0f};
    EXPECT_THROW(logprobs_at(row, 2, 0), Error);
    EXPECT_THROW(logprobs_at(row, -1, 0), Error);
    EXPECT_THROW(logprobs_at(row, 0, 3), Error);
    const float inf = std::numeric_limits<float>::infinity();
    EXPECT_THROW(logprobs_at(std::vector<float>{-inf, -inf}, 0, 1), Error);
}

}  // namespace
}  // namespace ds4::sampling
