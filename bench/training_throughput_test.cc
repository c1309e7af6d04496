#include "bench/training_throughput.h"

#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

TEST(TrainingThroughputTest, ExamplesCountTheShortLastBatchOfEachEpoch) {
  // Fashion-MNIST at batch 256: 235 steps per epoch, the last of 60000 - 234 * 256 = 96.
  EXPECT_EQ(ExamplesInSteps(0, 60000, 256), 0);
  EXPECT_EQ(ExamplesInSteps(1, 60000, 256), 256);
  EXPECT_EQ(ExamplesInSteps(234, 60000, 256), 234 * 256);
  EXPECT_EQ(ExamplesInSteps(235, 60000, 256), 60000);
  EXPECT_EQ(ExamplesInSteps(236, 60000, 256), 60000 + 256);
  EXPECT_EQ(ExamplesInSteps(600, 60000, 256), 2 * 60000 + 130 * 256);
  EXPECT_EQ(ExamplesInSteps(10, 1000, 100), 1000);  // no short batch
  EXPECT_EQ(ExamplesInSteps(-1, 60000, 256), 0);
  EXPECT_EQ(ExamplesInSteps(5, 60000, 0), 0);
}

TEST(TrainingThroughputTest, WindowStartsAfterWarmupAndEndsAtTheEnd) {
  std::vector<ProgressSample> samples = {{0.0, 0},  {1.0, 5},  {2.0, 10}, {3.0, 30},
                                         {4.0, 50}, {5.0, 60}, {6.0, 60}};
  std::optional<Window> w = SteadyWindow(samples, 10, 60, 1000, 10);
  ASSERT_TRUE(w.has_value());
  EXPECT_EQ(w->begin, 2);
  EXPECT_EQ(w->end, 5);
  EXPECT_DOUBLE_EQ(w->seconds, 3.0);
  EXPECT_EQ(w->steps, 50);
  EXPECT_EQ(w->examples, 500);
  EXPECT_DOUBLE_EQ(w->examples_per_s, 500.0 / 3.0);
}

TEST(TrainingThroughputTest, NoWindowWhenTheRunFallsShort) {
  std::vector<ProgressSample> samples = {{0.0, 0}, {1.0, 5}, {2.0, 40}};
  EXPECT_FALSE(SteadyWindow(samples, 10, 60, 1000, 10).has_value());
  EXPECT_FALSE(SteadyWindow(samples, 50, 60, 1000, 10).has_value());
  EXPECT_FALSE(SteadyWindow({}, 0, 1, 1000, 10).has_value());
  // The warm-up and the end land on the same sample: no time to divide by.
  EXPECT_FALSE(SteadyWindow(samples, 10, 40, 1000, 10).has_value());
}

}  // namespace
}  // namespace bench
}  // namespace shardps
