#include "ps_server/sync_accumulator.h"

#include <cstring>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps_server/gradient_bytes.h"

namespace shardps {
namespace {

std::string Bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// Adds replica r's dense gradient in one chunk.
SyncAccumulator::Result AddAll(SyncAccumulator& acc, int replica, int64_t rows,
                               const std::vector<float>& grad) {
  const std::string bytes = Bytes(grad);
  return acc.AddDense(replica, 0, rows, GradientBytes(bytes));
}

TEST(SyncAccumulatorTest, DenseSumIsInReplicaOrderWhateverTheArrivalOrder) {
  // Values whose float sum depends on the order: (a + b) + c != a + (b + c).
  const std::vector<std::vector<float>> grads = {
      {1e8f, 1.0f}, {-1e8f, 3.0f}, {1.0f, 1e-8f}};
  std::vector<float> first;
  for (const std::vector<int>& order : {std::vector<int>{0, 1, 2}, {2, 1, 0}, {1, 2, 0}}) {
    SyncAccumulator acc(3, /*replicas_to_aggregate=*/0, /*rows=*/2, /*width=*/1);
    for (size_t k = 0; k < order.size(); ++k) {
      const SyncAccumulator::Result r = AddAll(acc, order[k], 2, grads[order[k]]);
      EXPECT_FALSE(r.duplicate);
      EXPECT_EQ(r.complete, k + 1 == order.size());
    }
    const SyncAccumulator::StepGradient sum = acc.Sum();
    EXPECT_FALSE(sum.rows_only);
    const std::vector<float> expected = {(grads[0][0] + grads[1][0]) + grads[2][0],
                                         (grads[0][1] + grads[1][1]) + grads[2][1]};
    EXPECT_EQ(sum.values, expected);
    acc.Clear();
    EXPECT_FALSE(acc.in_progress());
  }
}

TEST(SyncAccumulatorTest, ChunksCompleteAReplicaAndReSentRowsAreDuplicates) {
  SyncAccumulator acc(2, /*replicas_to_aggregate=*/0, /*rows=*/4, /*width=*/2);
  EXPECT_FALSE(acc.in_progress());
  const std::string first = Bytes({1, 1, 2, 2});
  SyncAccumulator::Result r = acc.AddDense(0, 0, 2, GradientBytes(first));
  EXPECT_FALSE(r.duplicate);
  EXPECT_FALSE(r.complete);
  EXPECT_TRUE(acc.in_progress());
  // The same rows again (another worker re-running the step): nothing new.
  const std::string again = Bytes({9, 9, 9, 9});
  r = acc.AddDense(0, 0, 2, GradientBytes(again));
  EXPECT_TRUE(r.duplicate);
  // Rows 1-3: only rows 2 and 3 are new; row 1 keeps its first value.
  const std::string overlap = Bytes({7, 7, 3, 3, 4, 4});
  r = acc.AddDense(0, 1, 4, GradientBytes(overlap));
  EXPECT_FALSE(r.duplicate);
  EXPECT_FALSE(r.complete);
  r = AddAll(acc, 1, 4, {0, 0, 0, 0, 0, 0, 0, 0});
  EXPECT_TRUE(r.complete);
  EXPECT_EQ(acc.Sum().values, (std::vector<float>{1, 1, 2, 2, 3, 3, 4, 4}));
  acc.Clear();
  EXPECT_FALSE(acc.complete());
}

TEST(SyncAccumulatorTest, RowsOnlyStepsSumTheUnionOfSortedIds) {
  SyncAccumulator acc(2, /*replicas_to_aggregate=*/0, /*rows=*/6, /*width=*/2);
  auto r = acc.AddRows(1, {4, 1}, {1, 2, 3, 4});
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->complete);
  auto again = acc.AddRows(1, {0}, {5, 5});
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  r = acc.AddRows(0, {1, 0}, {10, 10, 20, 20});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->complete);
  EXPECT_TRUE(acc.rows_only());
  const SyncAccumulator::StepGradient sum = acc.Sum();
  EXPECT_TRUE(sum.rows_only);
  EXPECT_EQ(sum.ids, (std::vector<int64_t>{0, 1, 4}));
  EXPECT_EQ(sum.values, (std::vector<float>{20, 20, 10.0f + 3, 10.0f + 4, 1, 2}));
}

TEST(SyncAccumulatorTest, MixedStepsAreDenseAndAReplicaCannotSwitchKinds) {
  SyncAccumulator acc(2, /*replicas_to_aggregate=*/0, /*rows=*/3, /*width=*/1);
  ASSERT_TRUE(acc.AddRows(0, {2}, {5}).ok());
  const std::string part = Bytes({1});
  EXPECT_FALSE(acc.AddDense(1, 0, 1, GradientBytes(part)).complete);
  // Replica 1 began with a dense chunk: it cannot send rows for this step.
  const auto rows = acc.AddRows(1, {0}, {1});
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(rows.status().message().find("replica 1"), std::string::npos);
  const std::string rest = Bytes({2, 3});
  EXPECT_TRUE(acc.AddDense(1, 1, 3, GradientBytes(rest)).complete);
  EXPECT_FALSE(acc.rows_only());
  EXPECT_EQ(acc.Sum().values, (std::vector<float>{1, 2, 3.0f + 5}));
}

TEST(SyncAccumulatorTest, ACompleteStepStaysCompleteUntilCleared) {
  // A step whose apply failed (out of memory) is applied by the next push that arrives for
  // it, which sees complete = true although it adds nothing.
  SyncAccumulator acc(1, /*replicas_to_aggregate=*/0, /*rows=*/1, /*width=*/1);
  EXPECT_TRUE(AddAll(acc, 0, 1, {1}).complete);
  const SyncAccumulator::Result retry = AddAll(acc, 0, 1, {1});
  EXPECT_TRUE(retry.duplicate);
  EXPECT_TRUE(retry.complete);
  acc.Clear();
  EXPECT_FALSE(AddAll(acc, 0, 1, {1}).duplicate);
}

// Backup workers, k = 2 of n = 3: the first two replicas to complete make up the step,
// summed in replica order and scaled by n / k (n times their mean); the third is dropped.
TEST(SyncAccumulatorTest, TwoOfThreeCompleteTheStepAndTheMeanIsOverThem) {
  SyncAccumulator acc(3, /*replicas_to_aggregate=*/2, /*rows=*/2, /*width=*/1);
  EXPECT_EQ(acc.replicas_to_aggregate(), 2);
  EXPECT_TRUE(acc.has_backups());
  SyncAccumulator::Result r = AddAll(acc, 2, 2, {4, 8});
  EXPECT_FALSE(r.complete);
  EXPECT_FALSE(r.dropped);
  r = AddAll(acc, 0, 2, {2, 2});
  EXPECT_FALSE(r.dropped);
  EXPECT_TRUE(r.complete);
  // Replica 1 arrives after the step is complete: nothing is added.
  r = AddAll(acc, 1, 2, {1000, 1000});
  EXPECT_TRUE(r.dropped);
  EXPECT_FALSE(r.duplicate);
  EXPECT_TRUE(r.complete);
  // A replica that was used, sent again, is a duplicate, not a drop.
  r = AddAll(acc, 0, 2, {2, 2});
  EXPECT_TRUE(r.duplicate);
  EXPECT_FALSE(r.dropped);
  // Mean of replicas 0 and 2 ({3, 5}) times n = 3.
  EXPECT_EQ(acc.Sum().values, (std::vector<float>{(2.0f + 4) * 1.5f, (2.0f + 8) * 1.5f}));
}

// A replica that had only partly arrived when k others completed the step is left out of
// the sum; its later chunks are dropped.
TEST(SyncAccumulatorTest, APartlyArrivedReplicaIsLeftOutOfABackupStep) {
  SyncAccumulator acc(3, /*replicas_to_aggregate=*/2, /*rows=*/2, /*width=*/1);
  const std::string half = Bytes({100});
  EXPECT_FALSE(acc.AddDense(1, 0, 1, GradientBytes(half)).complete);
  EXPECT_FALSE(AddAll(acc, 0, 2, {1, 2}).complete);
  EXPECT_TRUE(AddAll(acc, 2, 2, {3, 4}).complete);
  const std::string rest = Bytes({100});
  const SyncAccumulator::Result late = acc.AddDense(1, 1, 2, GradientBytes(rest));
  EXPECT_TRUE(late.dropped);
  EXPECT_EQ(acc.Sum().values, (std::vector<float>{(1.0f + 3) * 1.5f, (2.0f + 4) * 1.5f}));
  acc.Clear();
  EXPECT_FALSE(acc.in_progress());
  // The next step starts afresh: replica 1 counts again.
  EXPECT_FALSE(AddAll(acc, 1, 2, {1, 1}).dropped);
}

// Rows too: only the used replicas' ids are in the step, and a dense replica left out does
// not make the step dense.
TEST(SyncAccumulatorTest, RowsOfABackupStepAreOnlyThoseOfTheReplicasUsed) {
  SyncAccumulator acc(3, /*replicas_to_aggregate=*/2, /*rows=*/6, /*width=*/1);
  const std::string part = Bytes({9});
  EXPECT_FALSE(acc.AddDense(0, 0, 1, GradientBytes(part)).complete);
  ASSERT_TRUE(acc.AddRows(2, {5}, {2}).ok());
  auto r = acc.AddRows(1, {3, 5}, {4, 6});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->complete);
  auto late = acc.AddRows(0, {1}, {1});
  ASSERT_TRUE(late.ok());
  EXPECT_TRUE(late->dropped);
  EXPECT_TRUE(acc.rows_only());
  const SyncAccumulator::StepGradient sum = acc.Sum();
  EXPECT_TRUE(sum.rows_only);
  EXPECT_EQ(sum.ids, (std::vector<int64_t>{3, 5}));
  EXPECT_EQ(sum.values, (std::vector<float>{4 * 1.5f, (6.0f + 2) * 1.5f}));
}

// k = n (or 0) is the plain sync step: all replicas, no scaling, the same bits.
TEST(SyncAccumulatorTest, AggregatingEveryReplicaIsTheDefault) {
  const std::vector<std::vector<float>> grads = {{1e8f, 1.0f}, {-1e8f, 3.0f}, {1.0f, 1e-8f}};
  std::vector<float> sums[2];
  const int ks[2] = {0, 3};
  for (int i = 0; i < 2; ++i) {
    SyncAccumulator acc(3, ks[i], /*rows=*/2, /*width=*/1);
    EXPECT_FALSE(acc.has_backups());
    EXPECT_EQ(acc.replicas_to_aggregate(), 3);
    EXPECT_FALSE(AddAll(acc, 1, 2, grads[1]).complete);
    EXPECT_FALSE(AddAll(acc, 0, 2, grads[0]).complete);
    EXPECT_TRUE(AddAll(acc, 2, 2, grads[2]).complete);
    sums[i] = acc.Sum().values;
  }
  EXPECT_EQ(sums[0], sums[1]);
  EXPECT_EQ(sums[0], (std::vector<float>{(grads[0][0] + grads[1][0]) + grads[2][0],
                                         (grads[0][1] + grads[1][1]) + grads[2][1]}));
}

}  // namespace
}  // namespace shardps
