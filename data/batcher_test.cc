#include "data/batcher.h"

#include <algorithm>
#include <numeric>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<int64_t> Identity(int64_t n) {
  std::vector<int64_t> v(n);
  std::iota(v.begin(), v.end(), 0);
  return v;
}

TEST(BatcherTest, SameSeedAndEpochGiveSameOrder) {
  Batcher a(1000, 42), b(1000, 42);
  EXPECT_EQ(a.EpochPermutation(3), b.EpochPermutation(3));
  EXPECT_EQ(a.BatchIndices(3, 2, 64).value(), b.BatchIndices(3, 2, 64).value());
}

TEST(BatcherTest, DifferentEpochsAndSeedsGiveDifferentOrders) {
  Batcher a(1000, 42), b(1000, 43);
  EXPECT_NE(a.EpochPermutation(0), a.EpochPermutation(1));
  EXPECT_NE(a.EpochPermutation(0), b.EpochPermutation(0));
  EXPECT_NE(a.EpochPermutation(0), Identity(1000));
}

TEST(BatcherTest, EveryExampleExactlyOncePerEpoch) {
  Batcher batcher(1003, 5);
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    std::vector<int64_t> seen;
    for (int64_t b = 0; b < batcher.NumBatches(100); ++b) {
      absl::StatusOr<std::vector<int64_t>> idx = batcher.BatchIndices(epoch, b, 100);
      ASSERT_TRUE(idx.ok()) << idx.status();
      seen.insert(seen.end(), idx->begin(), idx->end());
    }
    EXPECT_EQ(seen, batcher.EpochPermutation(epoch));
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, Identity(1003));
  }
}

// Pins the order itself: a change here changes which examples every job trains on, and
// machines with different standard libraries must agree.
TEST(BatcherTest, OrderIsPinned) {
  Batcher batcher(10, 42);
  EXPECT_THAT(batcher.EpochPermutation(0), ElementsAre(9, 6, 2, 0, 1, 4, 3, 8, 5, 7));
  EXPECT_THAT(batcher.EpochPermutation(1), ElementsAre(5, 4, 1, 3, 0, 2, 7, 8, 6, 9));
}

TEST(BatcherTest, LastBatchKeepsRemainderUnlessDropped) {
  Batcher batcher(10, 1);
  EXPECT_EQ(batcher.NumBatches(4), 3);
  EXPECT_EQ(batcher.NumBatches(4, /*drop_remainder=*/true), 2);
  EXPECT_EQ(batcher.NumBatches(5), 2);
  EXPECT_EQ(batcher.NumBatches(0), 0);
  EXPECT_EQ(batcher.BatchIndices(0, 2, 4).value().size(), 2u);
  absl::StatusOr<std::vector<int64_t>> dropped = batcher.BatchIndices(0, 2, 4, true);
  EXPECT_EQ(dropped.status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(dropped.status().message(), HasSubstr("batch index 2 is outside [0, 2)"));
}

TEST(BatcherTest, RejectsBadArguments) {
  Batcher batcher(10, 1);
  EXPECT_EQ(batcher.BatchIndices(0, 3, 4).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(batcher.BatchIndices(0, -1, 4).status().code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(batcher.BatchIndices(-1, 0, 4).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(batcher.BatchIndices(0, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(BatcherTest, ShuffleIsRoughlyUniform) {
  // Where example 0 lands over many epochs: each of 8 positions about 1/8 of the time.
  Batcher batcher(8, 99);
  std::vector<int> count(8, 0);
  constexpr int kEpochs = 8000;
  for (int e = 0; e < kEpochs; ++e) {
    std::vector<int64_t> p = batcher.EpochPermutation(e);
    ++count[std::find(p.begin(), p.end(), 0) - p.begin()];
  }
  for (int c : count) EXPECT_NEAR(c, kEpochs / 8, 150);
}

TEST(BatcherTest, ConcurrentReadersAgree) {
  Batcher batcher(5000, 3);
  const std::vector<int64_t> want0 = batcher.EpochPermutation(0);
  const std::vector<int64_t> want1 = batcher.EpochPermutation(1);
  std::vector<std::thread> threads;
  std::vector<int> bad(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const int64_t epoch = (i + t) % 2;
        const std::vector<int64_t>& want = epoch == 0 ? want0 : want1;
        std::vector<int64_t> got = batcher.BatchIndices(epoch, i % 10, 500).value();
        if (!std::equal(got.begin(), got.end(), want.begin() + (i % 10) * 500)) ++bad[t];
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(bad, ElementsAre(0, 0, 0, 0));
}

TEST(BatcherTest, GatherBatchCopiesRows) {
  Dataset ds;
  ds.num_examples = 3;
  ds.feature_dim = 2;
  ds.num_classes = 10;
  ds.features = {0, 1, 10, 11, 20, 21};
  ds.labels = {7, 8, 9};
  std::vector<float> f(4);
  std::vector<int32_t> l(2);
  ASSERT_TRUE(GatherBatch(ds, {2, 0}, f.data(), l.data()).ok());
  EXPECT_THAT(f, ElementsAre(20, 21, 0, 1));
  EXPECT_THAT(l, ElementsAre(9, 7));
  absl::Status bad = GatherBatch(ds, {1, 3}, f.data(), l.data());
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.message(), HasSubstr("batch position 1: example index 3 is outside [0, 3)"));
}

}  // namespace
}  // namespace shardps
