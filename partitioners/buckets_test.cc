#include "partitioners/buckets.h"

#include <vector>

#include "gtest/gtest.h"

namespace shardps {
namespace {

TEST(BucketOfTest, FixedValuesDoNotChangeAcrossReleases) {
  // Checkpoints and placements depend on these: a change here is a format change.
  EXPECT_EQ(BucketOf(0, 4096), BucketOf(0, 4096));
  const std::vector<int64_t> keys = {0, 1, -1, 42, int64_t{1} << 40};
  std::vector<int32_t> got;
  for (int64_t k : keys) got.push_back(BucketOf(k, 4096));
  // splitmix64 finalizer of (key ^ salt) mod 4096, computed independently below.
  auto reference = [](int64_t key) {
    uint64_t z = static_cast<uint64_t>(key) ^ 0x2545F4914F6CDD1DULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    return static_cast<int32_t>(z % 4096);
  };
  for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ(got[i], reference(keys[i])) << keys[i];
}

TEST(BucketOfTest, SpreadsSequentialKeysEvenly) {
  std::vector<int> counts(64, 0);
  for (int64_t k = 0; k < 64000; ++k) ++counts[BucketOf(k, 64)];
  for (int c : counts) {
    EXPECT_GT(c, 800);
    EXPECT_LT(c, 1200);
  }
}

TEST(SplitBucketsTest, ContiguousCoverWithSizesWithinOne) {
  const auto ranges = SplitBuckets(10, 3);
  ASSERT_EQ(ranges.size(), 3u);
  EXPECT_EQ(ranges[0].begin, 0);
  EXPECT_EQ(ranges[0].end, 4);
  EXPECT_EQ(ranges[1].begin, 4);
  EXPECT_EQ(ranges[1].end, 7);
  EXPECT_EQ(ranges[2].begin, 7);
  EXPECT_EQ(ranges[2].end, 10);
  EXPECT_TRUE(ranges[1].Contains(6));
  EXPECT_FALSE(ranges[1].Contains(7));
  const auto one = SplitBuckets(4096, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].end, 4096);
}

}  // namespace
}  // namespace shardps
