// The server batch loop's cost model (server/scheduler_cost.h): the fit recovers a step's fixed
// and per-row costs, follows a machine that changes speed, ignores what it cannot fit, and sizes
// prompt pieces so that a mixed step stays within the stall bound, shared by the slots reading.
#include <gtest/gtest.h>

#include "server/scheduler_cost.h"

namespace ds4::server {
namespace {

TEST(StepCost, FitsFixedAndPerRowCostsFromStepsOfSeveralSizes) {
    StepCost c({});
    EXPECT_FALSE(c.known());
    // Steps of one size say nothing about the slope.
    for (int i = 0; i < 10; ++i) c.observe(4, 0.050 + 0.002 * 4);
    EXPECT_FALSE(c.known());
    EXPECT_EQ(c.piece(4, 1), 128);  // the cold piece
    for (int64_t rows : {1, 2, 3, 36, 20, 4, 100, 2}) c.observe(rows, 0.050 + 0.002 * double(rows));
    ASSERT_TRUE(c.known());
    EXPECT_NEAR(c.fixed_seconds(), 0.050, 1e-9);
    EXPECT_NEAR(c.row_seconds(), 0.002, 1e-12);
    EXPECT_NEAR(c.estimate(10), 0.070, 1e-9);
}

TEST(StepCost, PiecesKeepAMixedStepWithinTheStallBound) {
    StepCost c({.stall = 3.0, .min_piece = 8, .max_piece = 512, .cold_piece = 128});
    for (int64_t rows : {1, 4, 40, 2, 100, 3}) c.observe(rows, 0.040 + 0.001 * double(rows));
    ASSERT_TRUE(c.known());
    // 4 generation rows alone: 44 ms; the bound 132 ms leaves 88 ms = 88 prompt rows.
    EXPECT_EQ(c.piece(4, 1), 88);
    EXPECT_NEAR(c.estimate(4 + c.piece(4, 1)), 3.0 * c.estimate(4), 1e-3);
    // Shared by the slots reading a prompt.
    EXPECT_EQ(c.piece(4, 2), 44);
    EXPECT_EQ(c.piece(4, 100), 8);    // never below the smallest piece
    EXPECT_EQ(c.piece(0, 3), 512);    // nobody generates: whole chunks
    // Costly fixed part (memory-bound steps): big pieces, capped by the chunk.
    StepCost m({.stall = 3.0, .min_piece = 8, .max_piece = 512});
    for (int64_t rows : {1, 4, 40, 2}) m.observe(rows, 1.0 + 0.001 * double(rows));
    EXPECT_EQ(m.piece(4, 1), 512);
}

TEST(StepCost, FollowsAMachineThatSlowsDownAndIgnoresNonsense) {
    StepCost c({});
    for (int k = 0; k < 5; ++k)
        for (int64_t rows : {1, 8, 64}) c.observe(rows, 0.010 + 0.001 * double(rows));
    const double before = c.row_seconds();
    EXPECT_NEAR(before, 0.001, 1e-9);
    for (int k = 0; k < 60; ++k)
        for (int64_t rows : {1, 8, 64}) c.observe(rows, 0.020 + 0.004 * double(rows));
    EXPECT_NEAR(c.row_seconds(), 0.004, 1e-4);
    EXPECT_NEAR(c.fixed_seconds(), 0.020, 2e-3);
    // Empty steps, negative or infinite times change nothing.
    const double per_row = c.row_seconds();
    c.observe(0, 1.0);
    c.observe(4, -1.0);
    c.observe(4, 1.0 / 0.0);
    EXPECT_EQ(c.row_seconds(), per_row);
}

}  // namespace
}  // namespace ds4::server
