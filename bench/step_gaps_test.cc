#include "bench/step_gaps.h"

#include <cmath>

#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

TEST(StepGapsTest, CompletionTimesFromCumulativeCounts) {
  EXPECT_EQ(CompletionTimes({{1.0, 1}, {2.0, 3}, {2.5, 3}, {3.0, 4}}),
            (std::vector<double>{1.0, 2.0, 2.0, 3.0}));
  // A count that starts again (a new journal after a rollback) goes on from its new level.
  EXPECT_EQ(CompletionTimes({{1.0, 2}, {2.0, 0}, {3.0, 1}}),
            (std::vector<double>{1.0, 1.0, 3.0}));
  EXPECT_TRUE(CompletionTimes({}).empty());
}

TEST(StepGapsTest, StepsPerSecondCountsTheHalfOpenWindow) {
  const std::vector<double> t = {0.0, 0.5, 1.0, 1.5, 2.0};
  EXPECT_DOUBLE_EQ(StepsPerSecond(t, 0.0, 2.0), 2.0);  // 0, 0.5, 1, 1.5
  EXPECT_DOUBLE_EQ(StepsPerSecond(t, 0.25, 1.25), 2.0);  // 0.5, 1
  EXPECT_EQ(StepsPerSecond(t, 3.0, 3.0), 0);
}

TEST(StepGapsTest, GapsWithinAWindow) {
  const std::vector<double> t = {0.0, 1.0, 3.0, 3.5, 7.0};
  EXPECT_EQ(GapsWithin(t, 0.5, 4.0), (std::vector<double>{2.0, 0.5}));
  EXPECT_EQ(GapsWithin(t, 0.0, 7.0), (std::vector<double>{1.0, 2.0, 0.5, 3.5}));
  EXPECT_TRUE(GapsWithin(t, 1.5, 2.5).empty());
}

TEST(StepGapsTest, LongestGapCountsAGapThatBeganBeforeTheWindow) {
  const std::vector<double> t = {0.0, 0.1, 0.2, 1.2, 1.3, 1.4, 3.0};
  // The window [0.5, 0.6] lies inside the gap 0.2 -> 1.2.
  Gap g = LongestGapOverlapping(t, 0.5, 0.6);
  ASSERT_TRUE(g.found);
  EXPECT_DOUBLE_EQ(g.begin, 0.2);
  EXPECT_DOUBLE_EQ(g.end, 1.2);
  // A window that reaches the later, longer gap.
  g = LongestGapOverlapping(t, 0.5, 1.45);
  ASSERT_TRUE(g.found);
  EXPECT_DOUBLE_EQ(g.begin, 1.4);
  EXPECT_DOUBLE_EQ(g.seconds(), 1.6);
  // Only gaps that overlap count: [0.1, 0.15] sees 0.1 -> 0.2 only.
  g = LongestGapOverlapping(t, 0.1, 0.15);
  ASSERT_TRUE(g.found);
  EXPECT_NEAR(g.seconds(), 0.1, 1e-12);
  EXPECT_FALSE(LongestGapOverlapping({1.0}, 0, 2).found);
  EXPECT_FALSE(LongestGapOverlapping(t, 4.0, 5.0).found);
}

TEST(StepGapsTest, FirstAfter) {
  const std::vector<double> t = {1.0, 2.0, 2.0, 3.0};
  EXPECT_EQ(FirstAfter(t, 1.0), 2.0);
  EXPECT_EQ(FirstAfter(t, 0.0), 1.0);
  EXPECT_TRUE(std::isnan(FirstAfter(t, 3.0)));
}

}  // namespace
}  // namespace bench
}  // namespace shardps
