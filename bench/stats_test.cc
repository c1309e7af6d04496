#include "bench/stats.h"

#include <cmath>

#include "gtest/gtest.h"

namespace shardps {
namespace bench {
namespace {

TEST(StatsTest, MedianOfOddAndEvenCounts) {
  EXPECT_EQ(Median({3, 1, 2}), 2);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
  EXPECT_TRUE(std::isnan(Median({})));
}

TEST(StatsTest, NearestRankPercentile) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(101 - i);  // 100 .. 1, unsorted
  EXPECT_EQ(Percentile(v, 0.5), 50);
  EXPECT_EQ(Percentile(v, 0.99), 99);
  EXPECT_EQ(Percentile(v, 1.0), 100);
  EXPECT_EQ(Percentile(v, 0.0), 1);
  EXPECT_EQ(Percentile({7}, 0.99), 7);
  EXPECT_TRUE(std::isnan(Percentile({}, 0.5)));
}

}  // namespace
}  // namespace bench
}  // namespace shardps
